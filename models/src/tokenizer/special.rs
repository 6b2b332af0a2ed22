//! Splitting input text on special-token texts before the model tokenizes the rest.

use aho_corasick::AhoCorasick;

use super::TokenType;

/// A piece of the input: text for the model, or a special token matched verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fragment<'a> {
    Text(&'a str),
    Token(u32),
}

/// The special tokens of a vocabulary, in llama.cpp's matching priority.
pub(super) struct SpecialTokens {
    /// (id, text, matched only when parsing specials), longest text first, ties by id.
    tokens: Vec<(u32, String, bool)>,
    /// Finds which special texts occur at all, so partitioning only loops over those.
    finder: Option<AhoCorasick>,
}

impl SpecialTokens {
    pub(super) fn new(texts: &[String], types: &[TokenType]) -> Self {
        let mut tokens: Vec<(u32, String, bool)> = texts
            .iter()
            .zip(types)
            .enumerate()
            .filter(|(_, (text, ty))| ty.is_special() && !text.is_empty())
            .map(|(id, (text, &ty))| (id as u32, text.clone(), ty != TokenType::UserDefined))
            .collect();
        tokens.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
        // Building can only fail for pattern sets far beyond any vocabulary; then every
        // token is simply tried.
        let finder = AhoCorasick::new(tokens.iter().map(|t| &t.1)).ok();
        Self { tokens, finder }
    }

    /// Splits `text` on special tokens as llama.cpp does: each special token in priority order
    /// (longest first) splits every text fragment left by the tokens before it. Control and
    /// unknown tokens are only matched when `parse_special` is set.
    pub(super) fn partition<'a>(&self, text: &'a str, parse_special: bool) -> Vec<Fragment<'a>> {
        let mut fragments = Vec::new();
        if text.is_empty() {
            return fragments;
        }
        fragments.push(Fragment::Text(text));

        let occurring: Vec<usize> = match &self.finder {
            Some(finder) => {
                let mut found: Vec<usize> = finder
                    .find_overlapping_iter(text)
                    .map(|m| m.pattern().as_usize())
                    .collect();
                found.sort_unstable();
                found.dedup();
                found
            }
            None => (0..self.tokens.len()).collect(),
        };

        for index in occurring {
            let (id, special, needs_parse) = &self.tokens[index];
            if *needs_parse && !parse_special {
                continue;
            }
            let mut next = Vec::with_capacity(fragments.len());
            for fragment in fragments {
                match fragment {
                    Fragment::Text(raw) => split_on(raw, special, *id, &mut next),
                    token => next.push(token),
                }
            }
            fragments = next;
        }
        fragments
    }
}

/// Pushes `raw` split on every non-overlapping occurrence of `special`, dropping empty text.
fn split_on<'a>(raw: &'a str, special: &str, id: u32, out: &mut Vec<Fragment<'a>>) {
    let mut rest = 0;
    for (start, _) in raw.match_indices(special) {
        if start > rest {
            out.push(Fragment::Text(&raw[rest..start]));
        }
        out.push(Fragment::Token(id));
        rest = start + special.len();
    }
    if rest < raw.len() {
        out.push(Fragment::Text(&raw[rest..]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specials(entries: &[(&str, TokenType)]) -> SpecialTokens {
        let texts: Vec<String> = entries.iter().map(|e| e.0.to_owned()).collect();
        let types: Vec<TokenType> = entries.iter().map(|e| e.1).collect();
        SpecialTokens::new(&texts, &types)
    }

    #[test]
    fn longest_token_wins_and_control_needs_parse_special() {
        let s = specials(&[
            ("<a>", TokenType::Control),
            ("<a><a>", TokenType::Control),
            ("\n", TokenType::UserDefined),
            ("x", TokenType::Normal),
        ]);
        use Fragment::*;
        assert_eq!(
            s.partition("x<a><a><a>\ny", true),
            [Text("x"), Token(1), Token(0), Token(2), Text("y")]
        );
        assert_eq!(
            s.partition("x<a>\ny", false),
            [Text("x<a>"), Token(2), Text("y")]
        );
        assert!(s.partition("", true).is_empty());
    }
}
