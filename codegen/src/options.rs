//! Target selection, validated before LLVM sees it: LLVM aborts the whole process on an unknown
//! CPU, and on a PTX version too old for the CPU.

use zinc_dsl::target::{self, Arch, ARCHS};

use crate::error::{ptx_str, CodegenError};

/// Every PTX ISA version (times ten) LLVM 22's NVPTX backend knows: its `+ptxNN` features.
/// 9.0 is the newest; there are no 4.4..4.9, 5.1..5.9, 6.6..6.9, 7.9 or 8.9.
pub const LLVM_PTX_VERSIONS: &[u32] = &[
    32, 40, 41, 42, 43, 50, 60, 61, 62, 63, 64, 65, 70, 71, 72, 73, 74, 75, 76, 77, 78, 80, 81, 82,
    83, 84, 85, 86, 87, 88, 90,
];

/// What to produce.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Emit {
    /// LLVM IR after the optimization pipeline.
    LlvmIr,
    Ptx,
}

/// A validated code generation target.
#[derive(Clone, Debug)]
pub struct Options {
    pub arch: &'static Arch,
    /// PTX ISA version times ten (8.7 -> 87).
    pub ptx_version: u32,
    /// LLVM optimization level, 0 to 3 (default 3).
    pub opt_level: u8,
}

impl Options {
    /// Looks up `arch_name` (e.g. "sm_90") and checks the PTX version ("8.7"; the arch's default
    /// when None) against the arch and against what LLVM can emit.
    pub fn new(arch_name: &str, ptx_version: Option<&str>) -> Result<Options, CodegenError> {
        let arch = target::arch(arch_name).ok_or_else(|| CodegenError::UnknownArch {
            name: arch_name.to_string(),
            known: ARCHS.iter().map(|a| a.name).collect::<Vec<_>>().join(", "),
        })?;
        let ptx_version = match ptx_version {
            None => arch.default_ptx,
            Some(s) => target::parse_ptx_version(s).ok_or_else(|| CodegenError::BadPtxVersion {
                given: s.to_string(),
            })?,
        };
        if ptx_version < arch.min_ptx {
            return Err(CodegenError::PtxVersionTooOld {
                arch: arch.name,
                given: ptx_version,
                min: arch.min_ptx,
            });
        }
        if !LLVM_PTX_VERSIONS.contains(&ptx_version) {
            return Err(CodegenError::PtxVersionUnsupported {
                given: ptx_version,
                supported: supported_from(arch.min_ptx),
            });
        }
        Ok(Options {
            arch,
            ptx_version,
            opt_level: 3,
        })
    }

    /// The LLVM target feature string selecting the PTX version.
    pub(crate) fn features(&self) -> String {
        format!("+ptx{}", self.ptx_version)
    }
}

/// "7.0 to 7.8, 8.0 to 8.8 and 9.0": the versions LLVM emits from `min` on, as ranges.
fn supported_from(min: u32) -> String {
    let mut ranges: Vec<(u32, u32)> = vec![];
    for &v in LLVM_PTX_VERSIONS.iter().filter(|&&v| v >= min) {
        match ranges.last_mut() {
            Some((_, hi)) if *hi + 1 == v => *hi = v,
            _ => ranges.push((v, v)),
        }
    }
    let parts: Vec<String> = ranges
        .iter()
        .map(|&(lo, hi)| match lo == hi {
            true => ptx_str(lo),
            false => format!("{} to {}", ptx_str(lo), ptx_str(hi)),
        })
        .collect();
    match parts.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => parts.join(""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_validation() {
        let o = Options::new("sm_90", None).unwrap();
        assert_eq!((o.arch.name, o.ptx_version, o.opt_level), ("sm_90", 78, 3));
        assert_eq!(Options::new("sm_120", None).unwrap().ptx_version, 87);
        assert_eq!(Options::new("89", Some("8.8")).unwrap().ptx_version, 88);

        let e = Options::new("sm_75", None).unwrap_err().to_string();
        assert!(
            e.starts_with("unknown arch `sm_75`; known: sm_80, sm_86, sm_89, sm_90"),
            "{e}"
        );
        let e = Options::new("sm_120", Some("7.8")).unwrap_err().to_string();
        assert_eq!(e, "PTX 7.8 is too old for sm_120 (needs at least 8.7)");
        let e = Options::new("sm_90", Some("7.9")).unwrap_err().to_string();
        assert_eq!(
            e,
            "PTX 7.9 is not supported by LLVM 22's NVPTX backend (it emits 7.8, 8.0 to 8.8 and 9.0)"
        );
        let e = Options::new("sm_89", Some("9.1")).unwrap_err().to_string();
        assert!(e.starts_with("PTX 9.1 is not supported"), "{e}");
        let e = Options::new("sm_89", Some("eight"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "`eight` is not a PTX version; write MAJOR.MINOR, e.g. 8.7"
        );
    }

    #[test]
    fn arch_table_fits_llvm() {
        for a in ARCHS {
            assert!(a.min_ptx <= a.default_ptx, "{}", a.name);
            assert!(LLVM_PTX_VERSIONS.contains(&a.min_ptx), "{}", a.name);
            assert!(LLVM_PTX_VERSIONS.contains(&a.default_ptx), "{}", a.name);
            assert!(a.max_static_shared <= a.max_shared_per_block, "{}", a.name);
        }
    }
}
