//! Byte-level BPE (`tokenizer.ggml.model = "gpt2"`): a regex pre-tokenizer splits the text
//! into words, each word's bytes map to printable characters (GPT-2's byte-to-unicode table),
//! and the lowest-ranked adjacent pair is merged until no merge applies.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::sync::OnceLock;

use fancy_regex::Regex;

use super::merge::{Pair, Symbols};
use super::TokenizerError;

// The pre-tokenizer patterns of the models' tokenizer.json files, as llama.cpp uses them
// (case-insensitive contractions spelled out).
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN35: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// llama.cpp's fallback for `default`: several patterns, each splitting the previous pieces.
const DEFAULT: &[&str] = &[
    r"[\p{P}\$\+<=>\^~\|]+",
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
    r"\p{N}+",
    r"[0-9][0-9][0-9]",
];

pub(super) struct Bpe {
    /// Rank of each merge, keyed by `"left right"`.
    ranks: HashMap<String, u32>,
    pre: Vec<Regex>,
    /// Llama 3 takes a word that is itself a token as is, without merging.
    ignore_merges: bool,
    /// Llama 3 vocabularies add BOS unless the file says otherwise.
    default_add_bos: bool,
}

/// A candidate merge; the heap pops the lowest rank, then the leftmost pair.
struct Candidate {
    rank: u32,
    pair: Pair,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        (other.rank, other.pair.left).cmp(&(self.rank, self.pair.left))
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

impl Bpe {
    pub(super) fn new(pre: &str, merges: &[String]) -> Result<Self, TokenizerError> {
        let (patterns, ignore_merges, default_add_bos): (&[&str], bool, bool) = match pre {
            "default" => (DEFAULT, false, false),
            "gpt-2" | "gpt2" | "phi-2" => (&[GPT2], false, false),
            "llama3" | "llama-v3" | "llama-bpe" => (&[LLAMA3], true, true),
            "qwen2" | "deepseek-r1-qwen" => (&[QWEN2], false, false),
            "qwen35" => (&[QWEN35], false, false),
            other => return Err(TokenizerError::UnsupportedPre(other.to_owned())),
        };
        let pre = patterns
            .iter()
            .map(|p| Regex::new(p).map_err(Box::new))
            .collect::<Result<_, _>>()?;
        let mut ranks = HashMap::with_capacity(merges.len());
        for (rank, merge) in merges.iter().enumerate() {
            // Ranks are keyed by the merge text itself, which must hold a separating space
            // after its first character.
            let first = merge.chars().next().map_or(0, char::len_utf8);
            if first == 0 || !merge[first..].contains(' ') {
                return Err(TokenizerError::BadMerge(merge.clone()));
            }
            // Keep the first (lowest) rank if a merge is listed twice.
            ranks.entry(merge.clone()).or_insert(rank as u32);
        }
        Ok(Self {
            ranks,
            pre,
            ignore_merges,
            default_add_bos,
        })
    }

    pub(super) fn adds_bos_by_default(&self) -> bool {
        self.default_add_bos
    }

    pub(super) fn encode(&self, text: &str, ids: &HashMap<String, u32>, out: &mut Vec<u32>) {
        for word in pre_tokenize(&self.pre, text) {
            let mapped = map_bytes(word);
            if self.ignore_merges {
                if let Some(&id) = ids.get(&mapped) {
                    out.push(id);
                    continue;
                }
            }
            self.encode_word(&mapped, ids, out);
        }
    }

    fn encode_word(&self, word: &str, ids: &HashMap<String, u32>, out: &mut Vec<u32>) {
        let mut symbols = Symbols::new(word);
        let mut heap = BinaryHeap::new();
        let mut key = String::new();
        let mut candidate = |symbols: &Symbols, pair: Pair| {
            let (left, right) = symbols.pair_parts(pair);
            key.clear();
            key.push_str(left);
            key.push(' ');
            key.push_str(right);
            self.ranks.get(&key).map(|&rank| Candidate { rank, pair })
        };
        for pair in symbols.initial_pairs() {
            heap.extend(candidate(&symbols, pair));
        }
        while let Some(Candidate { pair, .. }) = heap.pop() {
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
                // A merge result missing from the vocabulary: spell it per character.
                None => out.extend(
                    piece
                        .chars()
                        .filter_map(|c| ids.get(c.encode_utf8(&mut [0; 4]) as &str)),
                ),
            }
        }
    }
}

/// Splits `text` into words: each pattern splits every piece left by the ones before it,
/// keeping the text between matches as pieces of its own.
fn pre_tokenize<'a>(patterns: &[Regex], text: &'a str) -> Vec<&'a str> {
    let mut pieces = vec![text];
    for pattern in patterns {
        let mut next = Vec::with_capacity(pieces.len());
        for piece in pieces {
            let mut rest = 0;
            // Matching only fails on backtrack-limit blowups; the unmatched tail is kept whole.
            for m in pattern.find_iter(piece).map_while(Result::ok) {
                if m.start() > rest {
                    next.push(&piece[rest..m.start()]);
                }
                if !m.as_str().is_empty() {
                    next.push(m.as_str());
                }
                rest = m.end();
            }
            if rest < piece.len() {
                next.push(&piece[rest..]);
            }
        }
        pieces = next;
    }
    pieces
}

/// GPT-2's byte-to-unicode table: printable Latin-1 bytes stand for themselves, the other
/// bytes take the code points from U+0100 on, in byte order.
pub(super) fn byte_chars() -> &'static [char; 256] {
    static TABLE: OnceLock<[char; 256]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let mut next = 0x100;
        std::array::from_fn(|b| {
            let b = b as u8;
            if printable(b) {
                char::from(b)
            } else {
                let c = char::from_u32(next).expect("code points below U+0200 are valid");
                next += 1;
                c
            }
        })
    })
}

/// Spells `text`'s UTF-8 bytes with the byte-to-unicode table.
fn map_bytes(text: &str) -> String {
    let table = byte_chars();
    text.bytes().map(|b| table[b as usize]).collect()
}

/// The inverse of [`byte_chars`], indexed by code point (all of them are below U+0144).
fn char_bytes() -> &'static [Option<u8>; 0x144] {
    static TABLE: OnceLock<[Option<u8>; 0x144]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = [None; 0x144];
        for (b, &c) in byte_chars().iter().enumerate() {
            table[c as usize] = Some(b as u8);
        }
        table
    })
}

/// The bytes a byte-mapped token stands for; characters outside the table pass through.
pub(super) fn unmap_bytes(token: &str) -> Vec<u8> {
    let table = char_bytes();
    let mut bytes = Vec::with_capacity(token.len());
    for c in token.chars() {
        match table.get(c as usize).copied().flatten() {
            Some(b) => bytes.push(b),
            None => bytes.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_table_matches_gpt2() {
        let table = byte_chars();
        assert_eq!(table[b'A' as usize], 'A');
        assert_eq!(table[b' ' as usize], 'Ġ');
        assert_eq!(table[b'\n' as usize], 'Ċ');
        assert_eq!(table[0], 'Ā');
        assert_eq!(table[0xAD], 'Ń');
        assert_eq!(map_bytes("é"), "Ã©");
        assert_eq!(unmap_bytes("Ã©Ġx"), "é x".as_bytes());
    }

    #[test]
    fn llama3_pre_tokenizer() {
        let pre = [Regex::new(LLAMA3).unwrap()];
        assert_eq!(
            pre_tokenize(&pre, "Hello world's 12345  end\n\n  x"),
            ["Hello", " world", "'s", " ", "123", "45", " ", " end", "\n\n", " ", " x"]
        );
    }

    #[test]
    fn qwen2_splits_single_digits() {
        let pre = [Regex::new(QWEN2).unwrap()];
        assert_eq!(pre_tokenize(&pre, "a 123"), ["a", " ", "1", "2", "3"]);
    }

    #[test]
    fn default_pre_tokenizer_chains_patterns() {
        let pre: Vec<Regex> = DEFAULT.iter().map(|p| Regex::new(p).unwrap()).collect();
        assert_eq!(
            pre_tokenize(&pre, "ab, 12345!"),
            ["ab", ",", " ", "123", "45", "!"]
        );
    }
}
