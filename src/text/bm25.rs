//! An inverted index over a code base's files and BM25 search over it, scored as Lucene 8/9
//! scores (and so as Pyserini's `LuceneSearcher` did for SWE-bench): k1 = 0.9, b = 0.4,
//! idf = ln(1 + (N − n + 0.5) / (n + 0.5)), document lengths kept as Lucene's one-byte norms,
//! every step in 32-bit floats as Lucene computes it, a query term counted n times weighing
//! n times (Anserini's bag-of-words query), ties broken by document id.

use std::collections::BTreeMap;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::analyzer::Analyzer;

/// Pyserini's default BM25 parameters.
pub const K1: f32 = 0.9;
pub const B: f32 = 0.4;

/// Lucene refuses a query of more distinct terms than this (`maxClauseCount`).
pub const MAX_CLAUSES: usize = 1024;

/// A document: its id (the file's path) and the text that is indexed.
pub struct Document {
    pub id: String,
    pub text: String,
}

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub id: String,
    pub score: f32,
}

/// What a search found and what it searched for.
#[derive(Debug, Clone)]
pub struct SearchResult {
    pub hits: Vec<Hit>,
    /// How many characters of the query were used (all of them unless it had too many terms).
    pub query_chars: usize,
    pub query_chars_total: usize,
    /// Distinct terms in the query that was run.
    pub query_terms: usize,
}

struct Posting {
    doc: u32,
    freq: u32,
}

pub struct Index {
    ids: Vec<String>,
    /// Each document's length (terms), encoded as Lucene's norm byte.
    norms: Vec<u8>,
    postings: FxHashMap<String, Vec<Posting>>,
    /// Documents with at least one term (Lucene's `docCount`).
    doc_count: u64,
    /// All terms of all documents (Lucene's `sumTotalTermFreq`).
    total_terms: u64,
}

impl Index {
    /// Indexes `docs`, analysing them in parallel.
    pub fn build(docs: &[Document]) -> Index {
        let analysed: Vec<(Vec<(String, u32)>, u64)> = docs
            .par_iter()
            .map_init(Analyzer::new, |analyzer, doc| {
                let mut counts: FxHashMap<String, u32> = FxHashMap::default();
                let mut len = 0u64;
                analyzer.for_each_term(&doc.text, |t| {
                    len += 1;
                    match counts.get_mut(t) {
                        Some(n) => *n += 1,
                        None => {
                            counts.insert(t.to_string(), 1);
                        }
                    }
                });
                (counts.into_iter().collect(), len)
            })
            .collect();
        let mut postings: FxHashMap<String, Vec<Posting>> = FxHashMap::default();
        let mut norms = Vec::with_capacity(docs.len());
        let (mut doc_count, mut total_terms) = (0, 0);
        for (doc, (terms, len)) in analysed.into_iter().enumerate() {
            norms.push(int_to_byte4(len.min(i32::MAX as u64) as u32));
            if len > 0 {
                doc_count += 1;
                total_terms += len;
            }
            for (term, freq) in terms {
                postings.entry(term).or_default().push(Posting {
                    doc: doc as u32,
                    freq,
                });
            }
        }
        Index {
            ids: docs.iter().map(|d| d.id.clone()).collect(),
            norms,
            postings,
            doc_count,
            total_terms,
        }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The `k` best documents for `query`. A query of more than [`MAX_CLAUSES`] distinct terms
    /// is cut to 80% of its characters (rounded half to even) until it has few enough, as
    /// SWE-bench does when Lucene refuses it.
    pub fn search(&self, query: &str, k: usize) -> SearchResult {
        let mut analyzer = Analyzer::new();
        let total = query.chars().count();
        let mut cutoff = total;
        let terms = loop {
            let end = query
                .char_indices()
                .nth(cutoff)
                .map_or(query.len(), |(i, _)| i);
            let mut terms: BTreeMap<String, u32> = BTreeMap::new();
            analyzer.for_each_term(&query[..end], |t| {
                *terms.entry(t.to_string()).or_default() += 1;
            });
            if terms.len() <= MAX_CLAUSES {
                break terms;
            }
            cutoff = (cutoff as f64 * 0.8).round_ties_even() as usize;
        };
        SearchResult {
            hits: self.score(&terms, k),
            query_chars: cutoff,
            query_chars_total: total,
            query_terms: terms.len(),
        }
    }

    fn score(&self, terms: &BTreeMap<String, u32>, k: usize) -> Vec<Hit> {
        if self.doc_count == 0 {
            return Vec::new();
        }
        let avgdl = (self.total_terms as f64 / self.doc_count as f64) as f32;
        let mut norm_inverse = [0f32; 256];
        for (i, slot) in norm_inverse.iter_mut().enumerate() {
            *slot = 1.0 / (K1 * ((1.0 - B) + B * byte4_to_int(i as u8) as f32 / avgdl));
        }
        // Lucene adds the clauses' float scores in a double.
        let mut sums: FxHashMap<u32, f64> = FxHashMap::default();
        for (term, &count) in terms {
            let Some(postings) = self.postings.get(term) else {
                continue;
            };
            let df = postings.len() as f64;
            let n = self.doc_count as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln() as f32;
            let weight = count as f32 * idf;
            for p in postings {
                let inv = norm_inverse[usize::from(self.norms[p.doc as usize])];
                let score = weight - weight / (1.0 + p.freq as f32 * inv);
                *sums.entry(p.doc).or_default() += f64::from(score);
            }
        }
        let mut hits: Vec<(f32, u32)> = sums.into_iter().map(|(d, s)| (s as f32, d)).collect();
        hits.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then_with(|| self.ids[a.1 as usize].cmp(&self.ids[b.1 as usize]))
        });
        hits.into_iter()
            .take(k)
            .map(|(score, d)| Hit {
                id: self.ids[d as usize].clone(),
                score,
            })
            .collect()
    }
}

// Lucene's SmallFloat: a document length in one byte, exact up to 23 and then with 4
// significant bits (BM25Similarity.computeNorm / LENGTH_TABLE).

const fn long_to_int4(i: u64) -> u32 {
    let bits = 64 - i.leading_zeros();
    if bits < 4 {
        i as u32
    } else {
        let shift = bits - 4;
        (((i >> shift) as u32) & 0x07) | ((shift + 1) << 3)
    }
}

const fn int4_to_long(i: u32) -> u64 {
    let bits = (i & 0x07) as u64;
    let shift = (i >> 3) as i32 - 1;
    if shift == -1 {
        bits
    } else {
        (bits | 0x08) << shift
    }
}

const NUM_FREE_VALUES: u32 = 255 - long_to_int4(i32::MAX as u64);

fn int_to_byte4(i: u32) -> u8 {
    if i < NUM_FREE_VALUES {
        i as u8
    } else {
        (NUM_FREE_VALUES + long_to_int4(u64::from(i - NUM_FREE_VALUES))) as u8
    }
}

fn byte4_to_int(b: u8) -> u32 {
    let i = u32::from(b);
    if i < NUM_FREE_VALUES {
        i
    } else {
        (u64::from(NUM_FREE_VALUES) + int4_to_long(i - NUM_FREE_VALUES)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn norms_round_trip_as_lucene_encodes_them() {
        assert_eq!(NUM_FREE_VALUES, 24);
        for n in 0..24 {
            assert_eq!(byte4_to_int(int_to_byte4(n)), n);
        }
        // Past 23 a length keeps 4 significant bits, rounded down.
        assert_eq!(byte4_to_int(int_to_byte4(100)), 96);
        assert_eq!(byte4_to_int(int_to_byte4(1000)), 984);
        let mut last = 0;
        for b in 0..=255u8 {
            let n = byte4_to_int(b);
            assert!(n >= last, "the table increases");
            assert_eq!(int_to_byte4(n), b);
            last = n;
        }
    }
}
