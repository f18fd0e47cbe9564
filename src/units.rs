//! Quantities for people.

/// `12.3 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A size that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("`{0}` is not a size (try 4096, 64KiB, 512MiB, 4GiB)")]
    NotANumber(String),
    #[error("`{unit}` in `{given}` is not a size unit (B, KiB, MiB, GiB, TiB)")]
    BadUnit { unit: String, given: String },
    #[error("`{0}` is too large")]
    TooLarge(String),
}

/// Parses `123`, `64K`, `512MiB`, `4G`, `2GiB` (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| SizeError::NotANumber(s.to_string()))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(SizeError::BadUnit {
                unit: other.to_string(),
                given: s.to_string(),
            });
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| SizeError::TooLarge(s.to_string()))
}
