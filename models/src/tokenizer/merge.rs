//! The linked list of symbols that both merge-based tokenizers work on.

/// A run of text that started as one character and may have absorbed right neighbours.
struct Symbol {
    start: usize,
    /// Zero once merged into its left neighbour.
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// Two adjacent symbols as they were when the pair was proposed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pair {
    pub(super) left: usize,
    right: usize,
    left_len: usize,
    right_len: usize,
}

pub(super) struct Symbols<'a> {
    text: &'a str,
    symbols: Vec<Symbol>,
}

impl<'a> Symbols<'a> {
    /// One symbol per character of `text`.
    pub(super) fn new(text: &'a str) -> Self {
        let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
        for (start, c) in text.char_indices() {
            let index = symbols.len();
            symbols.push(Symbol {
                start,
                len: c.len_utf8(),
                prev: index.checked_sub(1),
                next: Some(index + 1),
            });
        }
        if let Some(last) = symbols.last_mut() {
            last.next = None;
        }
        Self { text, symbols }
    }

    fn pair(&self, left: usize, right: usize) -> Pair {
        Pair {
            left,
            right,
            left_len: self.symbols[left].len,
            right_len: self.symbols[right].len,
        }
    }

    /// Every adjacent pair of the initial characters, left to right.
    pub(super) fn initial_pairs(&self) -> Vec<Pair> {
        (1..self.symbols.len())
            .map(|i| self.pair(i - 1, i))
            .collect()
    }

    /// The pairs a freshly merged symbol forms with its neighbours.
    pub(super) fn neighbours(&self, index: usize) -> Vec<Pair> {
        let symbol = &self.symbols[index];
        let before = symbol.prev.map(|prev| self.pair(prev, index));
        let after = symbol.next.map(|next| self.pair(index, next));
        before.into_iter().chain(after).collect()
    }

    /// The texts of the pair's two sides.
    pub(super) fn pair_parts(&self, pair: Pair) -> (&'a str, &'a str) {
        let start = self.symbols[pair.left].start;
        let mid = start + pair.left_len;
        (
            &self.text[start..mid],
            &self.text[mid..mid + pair.right_len],
        )
    }

    /// The text the pair would merge into.
    pub(super) fn pair_text(&self, pair: Pair) -> &'a str {
        let start = self.symbols[pair.left].start;
        &self.text[start..start + pair.left_len + pair.right_len]
    }

    /// False once either side has been merged away or has grown since the pair was proposed.
    pub(super) fn is_current(&self, pair: Pair) -> bool {
        let (left, right) = (&self.symbols[pair.left], &self.symbols[pair.right]);
        left.len == pair.left_len && right.len == pair.right_len && left.len > 0 && right.len > 0
    }

    /// Merges the pair's right symbol into its left one and returns the left's index.
    pub(super) fn merge(&mut self, pair: Pair) -> usize {
        let next = self.symbols[pair.right].next;
        self.symbols[pair.right].len = 0;
        let left = &mut self.symbols[pair.left];
        left.len += pair.right_len;
        left.next = next;
        if let Some(next) = next {
            self.symbols[next].prev = Some(pair.left);
        }
        pair.left
    }

    /// The surviving symbols' texts, in order.
    pub(super) fn pieces(&self) -> impl Iterator<Item = &'a str> + '_ {
        let mut at = (!self.symbols.is_empty()).then_some(0);
        std::iter::from_fn(move || {
            let symbol = &self.symbols[at?];
            at = symbol.next;
            Some(&self.text[symbol.start..symbol.start + symbol.len])
        })
    }
}
