//! The Porter stemmer (M. F. Porter, 1980) as Lucene's `PorterStemFilter` applies it: the
//! algorithm of Porter's own reference implementation, with its two departures from the paper
//! (`-bli` → `-ble`, and `-logi` → `-log`), on UTF-16 code units, leaving words of one or two
//! units alone. Every unit other than `a e i o u` (and `y` after a consonant) is a consonant,
//! so digits, `_`, `.` and non-ASCII letters stay as they are and only count as consonants.
//!
//! rust-stemmers has only Porter2 (Snowball "english"), which stems many words differently
//! (`generalizations` → `general`, where Lucene gives `gener`), so it would not rank as
//! Pyserini ranks. `tests/text.rs` checks this one against Lucene on 3,000 words.

/// Stems one lowercased term.
pub fn stem(word: &str) -> String {
    let b: Vec<u16> = word.encode_utf16().collect();
    if b.len() <= 2 {
        return word.to_string();
    }
    let k = b.len() as isize - 1;
    let mut s = Stemmer { b, k, j: 0 };
    s.step1();
    s.step2();
    s.step3();
    s.step4();
    s.step5();
    s.step6();
    s.b.truncate((s.k + 1) as usize);
    String::from_utf16_lossy(&s.b)
}

/// The word being stemmed, in the reference implementation's terms: `b[0..=k]` is the word
/// now; `j` is where the stem ends before the suffix that the last successful
/// [`Stemmer::ends`] matched (-1 when the suffix was the whole word). Units past `k` are
/// left over and never read.
struct Stemmer {
    b: Vec<u16>,
    k: isize,
    j: isize,
}

impl Stemmer {
    fn ch(&self, i: isize) -> Option<char> {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.b.get(i))
            .and_then(|&u| char::from_u32(u32::from(u)))
    }

    fn unit(&self, i: isize) -> Option<u16> {
        usize::try_from(i).ok().and_then(|i| self.b.get(i)).copied()
    }

    fn cons(&self, i: isize) -> bool {
        match self.ch(i) {
            Some('a' | 'e' | 'i' | 'o' | 'u') => false,
            Some('y') => i == 0 || !self.cons(i - 1),
            _ => true,
        }
    }

    /// The number of vowel-consonant sequences in `b[0..=j]`.
    fn m(&self) -> usize {
        // The first position from `i` on, up to `j`, that is a consonant (`cons`) or a vowel.
        let next = |mut i: isize, cons: bool| {
            while i <= self.j {
                if self.cons(i) == cons {
                    return Some(i);
                }
                i += 1;
            }
            None
        };
        let mut n = 0;
        let Some(mut vowel) = next(0, false) else {
            return 0;
        };
        loop {
            let Some(consonant) = next(vowel + 1, true) else {
                return n;
            };
            n += 1;
            let Some(v) = next(consonant + 1, false) else {
                return n;
            };
            vowel = v;
        }
    }

    fn vowel_in_stem(&self) -> bool {
        (0..=self.j).any(|i| !self.cons(i))
    }

    fn double_cons(&self, j: isize) -> bool {
        j >= 1 && self.unit(j) == self.unit(j - 1) && self.cons(j)
    }

    /// `b[i-2..=i]` is consonant, vowel, consonant, and the last is not w, x or y.
    fn cvc(&self, i: isize) -> bool {
        if i < 2 || !self.cons(i) || self.cons(i - 1) || !self.cons(i - 2) {
            return false;
        }
        !matches!(self.ch(i), Some('w' | 'x' | 'y'))
    }

    /// Whether `b[0..=k]` ends with `s`; if so, `j` marks the stem before it.
    fn ends(&mut self, s: &str) -> bool {
        let o = self.k + 1 - s.len() as isize;
        if o < 0 {
            return false;
        }
        if !s
            .bytes()
            .enumerate()
            .all(|(i, c)| self.unit(o + i as isize) == Some(u16::from(c)))
        {
            return false;
        }
        self.j = o - 1;
        true
    }

    /// Replaces `b[j+1..=k]` with `s`.
    fn set_to(&mut self, s: &str) {
        let o = (self.j + 1) as usize;
        for (i, c) in s.bytes().enumerate() {
            match self.b.get_mut(o + i) {
                Some(u) => *u = u16::from(c),
                None => self.b.push(u16::from(c)),
            }
        }
        self.k = self.j + s.len() as isize;
    }

    fn r(&mut self, s: &str) {
        if self.m() > 0 {
            self.set_to(s);
        }
    }

    /// Plurals and -ed / -ing.
    fn step1(&mut self) {
        if self.ch(self.k) == Some('s') {
            if self.ends("sses") {
                self.k -= 2;
            } else if self.ends("ies") {
                self.set_to("i");
            } else if self.ch(self.k - 1) != Some('s') {
                self.k -= 1;
            }
        }
        if self.ends("eed") {
            if self.m() > 0 {
                self.k -= 1;
            }
        } else if (self.ends("ed") || self.ends("ing")) && self.vowel_in_stem() {
            self.k = self.j;
            if self.ends("at") {
                self.set_to("ate");
            } else if self.ends("bl") {
                self.set_to("ble");
            } else if self.ends("iz") {
                self.set_to("ize");
            } else if self.double_cons(self.k) {
                if !matches!(self.ch(self.k), Some('l' | 's' | 'z')) {
                    self.k -= 1;
                }
            } else if self.m() == 1 && self.cvc(self.k) {
                self.set_to("e");
            }
        }
    }

    /// A final y becomes i when the stem has a vowel.
    fn step2(&mut self) {
        if self.ends("y") && self.vowel_in_stem() {
            let k = self.k as usize;
            self.b[k] = u16::from(b'i');
        }
    }

    /// Double suffixes to single ones (-ization → -ize, …).
    fn step3(&mut self) {
        if self.k == 0 {
            return;
        }
        let rules: &[(&str, &str)] = match self.ch(self.k - 1) {
            Some('a') => &[("ational", "ate"), ("tional", "tion")],
            Some('c') => &[("enci", "ence"), ("anci", "ance")],
            Some('e') => &[("izer", "ize")],
            Some('l') => &[
                ("bli", "ble"),
                ("alli", "al"),
                ("entli", "ent"),
                ("eli", "e"),
                ("ousli", "ous"),
            ],
            Some('o') => &[("ization", "ize"), ("ation", "ate"), ("ator", "ate")],
            Some('s') => &[
                ("alism", "al"),
                ("iveness", "ive"),
                ("fulness", "ful"),
                ("ousness", "ous"),
            ],
            Some('t') => &[("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")],
            Some('g') => &[("logi", "log")],
            _ => &[],
        };
        self.first_rule(rules);
    }

    /// -ic-, -full, -ness and the like.
    fn step4(&mut self) {
        let rules: &[(&str, &str)] = match self.ch(self.k) {
            Some('e') => &[("icate", "ic"), ("ative", ""), ("alize", "al")],
            Some('i') => &[("iciti", "ic")],
            Some('l') => &[("ical", "ic"), ("ful", "")],
            Some('s') => &[("ness", "")],
            _ => &[],
        };
        self.first_rule(rules);
    }

    /// The first rule whose suffix the word ends with applies (when the stem's measure is
    /// positive); later rules are not tried.
    fn first_rule(&mut self, rules: &[(&str, &str)]) {
        for (suffix, replacement) in rules {
            if self.ends(suffix) {
                self.r(replacement);
                return;
            }
        }
    }

    /// -ant, -ence and the like, in a stem of measure over 1.
    fn step5(&mut self) {
        if self.k == 0 {
            return;
        }
        let matched = match self.ch(self.k - 1) {
            Some('a') => self.ends("al"),
            Some('c') => self.ends("ance") || self.ends("ence"),
            Some('e') => self.ends("er"),
            Some('i') => self.ends("ic"),
            Some('l') => self.ends("able") || self.ends("ible"),
            Some('n') => {
                self.ends("ant") || self.ends("ement") || self.ends("ment") || self.ends("ent")
            }
            Some('o') => {
                (self.ends("ion") && self.j >= 0 && matches!(self.ch(self.j), Some('s' | 't')))
                    || self.ends("ou")
            }
            Some('s') => self.ends("ism"),
            Some('t') => self.ends("ate") || self.ends("iti"),
            Some('u') => self.ends("ous"),
            Some('v') => self.ends("ive"),
            Some('z') => self.ends("ize"),
            _ => false,
        };
        if matched && self.m() > 1 {
            self.k = self.j;
        }
    }

    /// A final -e goes in a long enough stem; -ll becomes -l.
    fn step6(&mut self) {
        self.j = self.k;
        if self.ch(self.k) == Some('e') {
            let a = self.m();
            if a > 1 || (a == 1 && !self.cvc(self.k - 1)) {
                self.k -= 1;
            }
        }
        if self.ch(self.k) == Some('l') && self.double_cons(self.k) && self.m() > 1 {
            self.k -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::stem;

    #[test]
    fn classic_examples() {
        for (w, s) in [
            ("caresses", "caress"),
            ("ponies", "poni"),
            ("ties", "ti"),
            ("cats", "cat"),
            ("agreed", "agre"),
            ("plastered", "plaster"),
            ("motoring", "motor"),
            ("sing", "sing"),
            ("hopping", "hop"),
            ("falling", "fall"),
            ("filing", "file"),
            ("happy", "happi"),
            ("relational", "relat"),
            ("generalizations", "gener"),
            ("oscillators", "oscil"),
            ("is", "is"),
        ] {
            assert_eq!(stem(w), s, "{w}");
        }
    }
}
