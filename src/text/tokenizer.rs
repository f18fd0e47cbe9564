//! Token counts in OpenAI's `cl100k_base`, the encoding SWE-bench's text datasets are
//! budgeted in. tiktoken-rs compiles the encoding file into the binary (its sha256 is the one
//! Python tiktoken checks, 223921b7…b2a7), so nothing is downloaded at run time.

use tiktoken_rs::CoreBPE;

fn encoding() -> &'static CoreBPE {
    tiktoken_rs::cl100k_base_singleton()
}

/// The token ids of `text` as SWE-bench counts them: Python tiktoken's
/// `encode(text, disallowed_special=())`, where special-token text such as `<|endoftext|>`
/// is ordinary text.
pub fn encode(text: &str) -> Vec<u32> {
    encoding().encode_ordinary(text)
}

/// How many tokens `text` is.
pub fn count(text: &str) -> usize {
    encode(text).len()
}
