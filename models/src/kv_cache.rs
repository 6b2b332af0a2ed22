//! Per-layer key/value cache of the CPU forward pass.

/// Keys and values of every layer for positions `0..len()`, row-major `[pos][kv_heads * head_dim]`.
///
/// Sliding-window layers keep all positions too: the window is a mask in attention, which keeps
/// the cache trivially rewindable and its layout identical across layer kinds.
#[derive(Clone, Debug)]
pub struct KvCache {
    layers: Vec<LayerCache>,
}

#[derive(Clone, Debug)]
struct LayerCache {
    k_row: usize,
    v_row: usize,
    k: Vec<f32>,
    v: Vec<f32>,
}

impl KvCache {
    /// One `(k_row, v_row)` pair of row widths per layer.
    pub fn new(rows: impl IntoIterator<Item = (usize, usize)>) -> Self {
        let layers = rows
            .into_iter()
            .map(|(k_row, v_row)| LayerCache {
                k_row,
                v_row,
                k: Vec::new(),
                v: Vec::new(),
            })
            .collect();
        Self { layers }
    }

    /// Number of cached positions (those of the first layer; all layers agree between calls).
    pub fn len(&self) -> usize {
        self.layers.first().map_or(0, |l| l.k.len() / l.k_row)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every position from `len` on.
    pub fn truncate(&mut self, len: usize) {
        for l in &mut self.layers {
            l.k.truncate(len * l.k_row);
            l.v.truncate(len * l.v_row);
        }
    }

    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Appends rows of keys and values to layer `layer` and returns all of its cached keys and
    /// values, the new ones included.
    pub fn append(&mut self, layer: usize, k: &[f32], v: &[f32]) -> (&[f32], &[f32]) {
        let l = &mut self.layers[layer];
        debug_assert_eq!(k.len() / l.k_row, v.len() / l.v_row);
        l.k.extend_from_slice(k);
        l.v.extend_from_slice(v);
        (&l.k, &l.v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_truncate() {
        let mut c = KvCache::new([(2, 3), (2, 3)]);
        assert!(c.is_empty());
        for layer in 0..2 {
            let (k, v) = c.append(layer, &[1.0, 2.0, 3.0, 4.0], &[0.0; 6]);
            assert_eq!((k.len(), v.len()), (4, 6));
        }
        assert_eq!(c.len(), 2);
        c.truncate(1);
        assert_eq!(c.len(), 1);
        let (k, _) = c.append(0, &[9.0, 9.0], &[0.0; 3]);
        assert_eq!(k, &[1.0, 2.0, 9.0, 9.0]);
        c.clear();
        assert!(c.is_empty());
    }
}
