//! Per-layer key/value cache of the CPU forward pass, and the state of recurrent layers.

/// Keys and values of every layer for positions `0..len()`, row-major `[pos][kv_heads * head_dim]`.
///
/// Sliding-window layers keep all positions too: the window is a mask in attention, which keeps
/// the cache trivially rewindable and its layout identical across layer kinds.
#[derive(Clone, Debug)]
pub struct KvCache {
    layers: Vec<LayerCache>,
    /// Per layer: the state of a recurrent (linear-attention) layer, created on first use.
    recurrent: Vec<Option<RecurrentState>>,
}

/// What a recurrent layer remembers of positions `0..len`: the last inputs of its causal
/// convolution and its SSM state. Unlike keys and values it summarizes every position at once,
/// so it can only be rewound to the start.
#[derive(Clone, Debug, PartialEq)]
pub struct RecurrentState {
    pub conv: Vec<f32>,
    pub ssm: Vec<f32>,
    len: usize,
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
            .collect::<Vec<_>>();
        let recurrent = vec![None; layers.len()];
        Self { layers, recurrent }
    }

    /// Number of cached positions: the most any layer holds (all layers that hold positions
    /// agree between calls; those of recurrent layers hold no keys).
    pub fn len(&self) -> usize {
        let kv = self.layers.iter().map(|l| l.k.len() / l.k_row);
        let rec = self.recurrent.iter().flatten().map(|r| r.len);
        kv.chain(rec).max().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether [`KvCache::truncate`] can keep exactly `len` positions: recurrent state can only
    /// be kept whole or dropped.
    pub fn can_truncate(&self, len: usize) -> bool {
        len == 0 || self.recurrent.iter().flatten().all(|r| r.len <= len)
    }

    /// Forgets every position from `len` on; recurrent state is dropped when `len` is 0 and
    /// must otherwise hold at most `len` positions (see [`KvCache::can_truncate`]).
    pub fn truncate(&mut self, len: usize) {
        debug_assert!(self.can_truncate(len));
        for l in &mut self.layers {
            l.k.truncate(len * l.k_row);
            l.v.truncate(len * l.v_row);
        }
        if len == 0 {
            self.recurrent.fill(None);
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

    /// The recurrent state of layer `layer` (zeros of the given sizes before its first call),
    /// counted as advanced by the `n_tokens` positions the caller is about to run through it.
    pub fn recurrent(
        &mut self,
        layer: usize,
        conv_len: usize,
        ssm_len: usize,
        n_tokens: usize,
    ) -> &mut RecurrentState {
        let state = self.recurrent[layer].get_or_insert_with(|| RecurrentState {
            conv: vec![0.0; conv_len],
            ssm: vec![0.0; ssm_len],
            len: 0,
        });
        state.len += n_tokens;
        state
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

    #[test]
    fn recurrent_state_counts_positions_and_only_resets() {
        let mut c = KvCache::new([(2, 2), (2, 2)]);
        c.recurrent(0, 3, 4, 5).ssm[0] = 1.0;
        c.append(1, &[0.0; 10], &[0.0; 10]);
        assert_eq!(c.len(), 5);
        assert!(c.can_truncate(5) && c.can_truncate(0) && !c.can_truncate(4));
        assert_eq!(c.recurrent(0, 3, 4, 1).ssm, [1.0, 0.0, 0.0, 0.0]);
        c.truncate(0);
        assert!(c.is_empty());
        assert_eq!(c.recurrent(0, 3, 4, 1).ssm, [0.0; 4]);
    }
}
