//! The terms of a text as Lucene's English analyzer makes them (Pyserini's default, which
//! SWE-bench's BM25 retrieval used): StandardTokenizer (UAX #29 word boundaries, tokens of at
//! most 255 UTF-16 units), EnglishPossessiveFilter, LowerCaseFilter, StopFilter with Lucene's
//! 33 English stop words, PorterStemFilter. Where it can differ from Lucene is written down
//! in docs/TEXT.md; `tests/text.rs` compares it with Lucene's own output.

use rustc_hash::FxHashMap;
use unicode_segmentation::UnicodeSegmentation;

use super::porter;

/// Lucene's `EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`.
const STOP_WORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// StandardTokenizer's default maximum token length, in UTF-16 units; longer tokens are cut
/// into pieces of this length.
const MAX_TOKEN_LENGTH: usize = 255;

/// Turns texts into terms, remembering the stems it has computed (terms repeat a lot in code).
#[derive(Default)]
pub struct Analyzer {
    stems: FxHashMap<String, String>,
}

impl Analyzer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Calls `f` with each term of `text`, in order.
    pub fn for_each_term(&mut self, text: &str, mut f: impl FnMut(&str)) {
        let mut lower = String::new();
        for word in text.split_word_bounds() {
            if !is_token(word) {
                continue;
            }
            for piece in chop(word) {
                lower.clear();
                lowercase_into(strip_possessive(piece), &mut lower);
                if lower.is_empty() || STOP_WORDS.contains(&lower.as_str()) {
                    continue;
                }
                match self.stems.get(lower.as_str()) {
                    Some(s) => f(s),
                    None => {
                        let s = porter::stem(&lower);
                        f(&s);
                        self.stems.insert(lower.clone(), s);
                    }
                }
            }
        }
    }

    /// The terms of `text`, in order.
    pub fn terms(&mut self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.for_each_term(text, |t| out.push(t.to_string()));
        out
    }
}

/// Whether a UAX #29 word segment is a token: StandardTokenizer emits words with letters or
/// digits (ideographs and kana one character each, as the segmentation already splits them)
/// and emoji; punctuation, spaces and other symbols are not tokens.
fn is_token(word: &str) -> bool {
    word.chars().any(|c| c.is_alphanumeric() || is_emoji(c))
}

/// Emoji as StandardTokenizer emits them, approximately: the pictographic blocks and
/// regional indicators. Lucene uses the Unicode emoji properties, which no crate here exposes;
/// emoji rarely decide a code search.
fn is_emoji(c: char) -> bool {
    matches!(u32::from(c), 0x1F000..=0x1FAFF | 0x2600..=0x26FF | 0x2B50 | 0x2B55)
}

/// A token cut into pieces of at most [`MAX_TOKEN_LENGTH`] UTF-16 units (never inside a
/// character).
fn chop(word: &str) -> impl Iterator<Item = &str> {
    let mut rest = word;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut units = 0;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            if units + c.len_utf16() > MAX_TOKEN_LENGTH {
                end = i;
                break;
            }
            units += c.len_utf16();
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

/// EnglishPossessiveFilter: a trailing `'s` (with `'`, `’` or `＇`, and `s` or `S`) goes.
fn strip_possessive(token: &str) -> &str {
    let mut rev = token.chars().rev();
    match (rev.next(), rev.next()) {
        (Some('s' | 'S'), Some(q @ ('\'' | '\u{2019}' | '\u{FF07}'))) => {
            &token[..token.len() - 1 - q.len_utf8()]
        }
        _ => token,
    }
}

/// LowerCaseFilter: Java's `Character.toLowerCase`, one character at a time (no final-sigma
/// rule; `İ` becomes `i`, as Java's simple case mapping has it).
fn lowercase_into(token: &str, out: &mut String) {
    if token.is_ascii() {
        out.push_str(token);
        out.make_ascii_lowercase();
        return;
    }
    for c in token.chars() {
        if c == '\u{130}' {
            out.push('i');
            continue;
        }
        let mut lower = c.to_lowercase();
        match (lower.next(), lower.next()) {
            (Some(l), None) => out.push(l),
            _ => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anserini_examples() {
        let mut a = Analyzer::new();
        assert_eq!(a.terms("sample query"), ["sampl", "queri"]);
        assert_eq!(
            a.terms("Mary had a little lamb"),
            ["mari", "had", "littl", "lamb"]
        );
    }

    #[test]
    fn long_tokens_are_cut() {
        let word = "x".repeat(300);
        let pieces: Vec<&str> = chop(&word).collect();
        assert_eq!(
            pieces.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [255, 45]
        );
    }
}
