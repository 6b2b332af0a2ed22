//! SentencePiece-style tokenization (`tokenizer.ggml.model = "llama"`), as llama.cpp does it:
//! start from single characters and repeatedly merge the adjacent pair whose concatenation is
//! the highest-scoring vocabulary token; characters left without a token become byte tokens.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use super::merge::{Pair, Symbols};

pub(super) struct Spm {
    scores: Vec<f32>,
    /// `<0xNN>` token ids, for characters that have no token of their own.
    byte_tokens: Box<[Option<u32>; 256]>,
}

/// A candidate merge; the heap pops the highest score, then the leftmost pair.
struct Candidate {
    score: f32,
    pair: Pair,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.pair.left.cmp(&self.pair.left))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate {}

impl Spm {
    pub(super) fn new(scores: Vec<f32>, ids: &HashMap<String, u32>, unk: Option<u32>) -> Self {
        // Like llama.cpp, a vocabulary without `<0xNN>` may spell ASCII bytes as themselves.
        let byte_tokens = Box::new(std::array::from_fn(|b| {
            let by_hex = ids.get(&format!("<0x{b:02X}>"));
            let by_char = || {
                char::from_u32(b as u32)
                    .filter(char::is_ascii)
                    .and_then(|c| ids.get(c.encode_utf8(&mut [0; 4]) as &str))
            };
            by_hex.or_else(by_char).copied().or(unk)
        }));
        Self {
            scores,
            byte_tokens,
        }
    }

    /// Tokenizes `text`, whose spaces the caller has already replaced with `▁`.
    pub(super) fn encode(&self, text: &str, ids: &HashMap<String, u32>, out: &mut Vec<u32>) {
        let mut symbols = Symbols::new(text);
        let mut heap = BinaryHeap::new();
        let candidate = |symbols: &Symbols, pair: Pair| {
            ids.get(symbols.pair_text(pair)).map(|&id| Candidate {
                score: self.scores[id as usize],
                pair,
            })
        };
        for pair in symbols.initial_pairs() {
            heap.extend(candidate(&symbols, pair));
        }
        while let Some(Candidate { pair, .. }) = heap.pop() {
            // Skip pairs made stale by an earlier merge of either side.
            if !symbols.is_current(pair) {
                continue;
            }
            let merged = symbols.merge(pair);
            for pair in symbols.neighbours(merged) {
                heap.extend(candidate(&symbols, pair));
            }
        }
        for piece in symbols.pieces() {
            match ids.get(piece) {
                Some(&id) => out.push(id),
                None => out.extend(piece.bytes().filter_map(|b| self.byte_tokens[b as usize])),
            }
        }
    }
}
