use std::fmt;

/// Defines [`GgmlType`] from one table so that ids, names and sizes cannot drift apart.
macro_rules! ggml_types {
    ($($ty:ident = $id:literal: $block:expr, $bytes:expr;)*) => {
        /// A ggml tensor type. Variant names and ids are ggml's, so they read as in llama.cpp.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u32)]
        pub enum GgmlType {
            $($ty = $id,)*
        }

        impl GgmlType {
            /// Every type in the table, in id order.
            pub const ALL: &'static [GgmlType] = &[$(GgmlType::$ty,)*];

            /// ggml's name for the type, e.g. `"Q4_K"`.
            pub fn name(self) -> &'static str {
                match self {
                    $(GgmlType::$ty => stringify!($ty),)*
                }
            }

            /// Number of weights in one block.
            pub fn block_size(self) -> usize {
                match self {
                    $(GgmlType::$ty => $block,)*
                }
            }

            /// Number of bytes in one block.
            pub fn type_size(self) -> usize {
                match self {
                    $(GgmlType::$ty => $bytes,)*
                }
            }
        }
    };
}

const QK_K: usize = 256;

ggml_types! {
    F32 = 0: 1, 4;
    F16 = 1: 1, 2;
    Q4_0 = 2: 32, 2 + 16;
    Q4_1 = 3: 32, 2 + 2 + 16;
    Q5_0 = 6: 32, 2 + 4 + 16;
    Q5_1 = 7: 32, 2 + 2 + 4 + 16;
    Q8_0 = 8: 32, 2 + 32;
    Q8_1 = 9: 32, 2 + 2 + 32;
    Q2_K = 10: QK_K, QK_K / 16 + QK_K / 4 + 2 + 2;
    Q3_K = 11: QK_K, QK_K / 8 + QK_K / 4 + 12 + 2;
    Q4_K = 12: QK_K, 2 + 2 + 12 + QK_K / 2;
    Q5_K = 13: QK_K, 2 + 2 + 12 + QK_K / 8 + QK_K / 2;
    Q6_K = 14: QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2;
    Q8_K = 15: QK_K, 4 + QK_K + 2 * QK_K / 16;
    IQ2_XXS = 16: QK_K, 2 + QK_K / 4;
    IQ2_XS = 17: QK_K, 2 + QK_K / 4 + QK_K / 32;
    IQ3_XXS = 18: QK_K, 2 + QK_K / 4 + QK_K / 8;
    IQ1_S = 19: QK_K, 2 + QK_K / 8 + QK_K / 16;
    IQ4_NL = 20: 32, 2 + 16;
    IQ3_S = 21: QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4;
    IQ2_S = 22: QK_K, 2 + QK_K / 4 + QK_K / 16;
    IQ4_XS = 23: QK_K, 2 + 2 + QK_K / 2 + QK_K / 64;
    I8 = 24: 1, 1;
    I16 = 25: 1, 2;
    I32 = 26: 1, 4;
    I64 = 27: 1, 8;
    F64 = 28: 1, 8;
    IQ1_M = 29: QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32;
    BF16 = 30: 1, 2;
    TQ1_0 = 34: QK_K, 2 + 4 * 13;
    TQ2_0 = 35: QK_K, 2 + QK_K / 4;
    MXFP4 = 39: 32, 1 + 16;
}

impl GgmlType {
    /// The type with ggml id `id`, if it is in the table.
    pub fn from_id(id: u32) -> Option<Self> {
        Self::ALL.iter().copied().find(|ty| ty.id() == id)
    }

    /// ggml's numeric id, as stored in GGUF tensor infos.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// Bytes taken by `n_elements` weights, or `None` when that is not a whole number of blocks
    /// or the size overflows.
    pub fn bytes_for(self, n_elements: u64) -> Option<u64> {
        let block = self.block_size() as u64;
        if !n_elements.is_multiple_of(block) {
            return None;
        }
        (n_elements / block).checked_mul(self.type_size() as u64)
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_are_unique() {
        for &ty in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(ty.id()), Some(ty));
        }
        for removed in [4, 5, 31, 32, 33, 1000] {
            assert_eq!(GgmlType::from_id(removed), None);
        }
    }

    #[test]
    fn block_layouts_match_ggml() {
        let expect = [
            (GgmlType::Q4_0, 32, 18),
            (GgmlType::Q4_1, 32, 20),
            (GgmlType::Q5_0, 32, 22),
            (GgmlType::Q5_1, 32, 24),
            (GgmlType::Q8_0, 32, 34),
            (GgmlType::Q8_1, 32, 36),
            (GgmlType::Q2_K, 256, 84),
            (GgmlType::Q3_K, 256, 110),
            (GgmlType::Q4_K, 256, 144),
            (GgmlType::Q5_K, 256, 176),
            (GgmlType::Q6_K, 256, 210),
            (GgmlType::Q8_K, 256, 292),
            (GgmlType::BF16, 1, 2),
        ];
        for (ty, block, bytes) in expect {
            assert_eq!((ty.block_size(), ty.type_size()), (block, bytes), "{ty}");
        }
    }

    #[test]
    fn bytes_for_requires_whole_blocks() {
        assert_eq!(GgmlType::Q4_K.bytes_for(512), Some(288));
        assert_eq!(GgmlType::Q4_K.bytes_for(100), None);
        assert_eq!(GgmlType::F32.bytes_for(u64::MAX), None);
    }
}
