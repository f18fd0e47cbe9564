//! RFC 3339 times, as GitHub gives them, read into instants that compare as times do.

use super::RulesError;

/// An instant: seconds since the Unix epoch (UTC) and nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Instant {
    pub seconds: i64,
    pub nanos: u32,
}

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses an RFC 3339 time: `YYYY-MM-DDTHH:MM:SS`, an optional fraction of up to 9 digits,
/// then `Z` or an offset `+HH:MM`/`-HH:MM`. `T` may be `t` or a space and `Z` may be `z`, as
/// RFC 3339 allows. A leap second (`:60`) counts as the next minute's first second.
pub fn parse_rfc3339(value: &str) -> Result<Instant, RulesError> {
    let err = |reason: &str| RulesError::BadTime {
        value: value.to_string(),
        reason: reason.to_string(),
    };
    let b = value.as_bytes();
    let digits = |from: usize, n: usize| -> Result<i64, RulesError> {
        let part = b
            .get(from..from + n)
            .filter(|p| p.iter().all(u8::is_ascii_digit))
            .ok_or_else(|| err(&format!("expected {n} digits at character {}", from + 1)))?;
        Ok(part.iter().fold(0, |acc, d| acc * 10 + i64::from(d - b'0')))
    };
    let expect = |at: usize, allowed: &[u8], what: &str| -> Result<(), RulesError> {
        match b.get(at) {
            Some(c) if allowed.contains(c) => Ok(()),
            _ => Err(err(&format!("expected {what} at character {}", at + 1))),
        }
    };
    let year = digits(0, 4)?;
    expect(4, b"-", "`-`")?;
    let month = digits(5, 2)?;
    expect(7, b"-", "`-`")?;
    let day = digits(8, 2)?;
    expect(10, b"Tt ", "`T`")?;
    let hour = digits(11, 2)?;
    expect(13, b":", "`:`")?;
    let minute = digits(14, 2)?;
    expect(16, b":", "`:`")?;
    let second = digits(17, 2)?;
    let mut at = 19;
    let mut nanos: u32 = 0;
    if b.get(at) == Some(&b'.') {
        let frac: Vec<u8> = b[at + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .copied()
            .collect();
        if frac.is_empty() || frac.len() > 9 {
            return Err(err("a fraction of a second needs 1 to 9 digits"));
        }
        let mut n: u32 = 0;
        for i in 0..9 {
            n = n * 10 + frac.get(i).map_or(0, |d| u32::from(d - b'0'));
        }
        nanos = n;
        at += 1 + frac.len();
    }
    let offset_seconds = match b.get(at) {
        Some(b'Z' | b'z') if at + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if at + 6 == b.len() => {
            let h = digits(at + 1, 2)?;
            expect(at + 3, b":", "`:` in the offset")?;
            let m = digits(at + 4, 2)?;
            if h > 23 || m > 59 {
                return Err(err("the offset is out of range"));
            }
            let s = h * 3600 + m * 60;
            if sign == b'-' { -s } else { s }
        }
        _ => {
            return Err(err(
                "expected `Z` or an offset `+HH:MM`/`-HH:MM` at the end",
            ));
        }
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month) {
        return Err(err("the month is out of range"));
    }
    let month_index = usize::try_from(month - 1).expect("the month is 1 to 12");
    if day < 1 || day > month_days[month_index] {
        return Err(err("the day is out of range"));
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err(err("the time of day is out of range"));
    }
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset_seconds;
    Ok(Instant { seconds, nanos })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times() {
        let t = |v: &str| parse_rfc3339(v).unwrap();
        assert_eq!(
            t("1970-01-01T00:00:00Z"),
            Instant {
                seconds: 0,
                nanos: 0
            }
        );
        assert_eq!(
            t("1970-01-01T01:00:00+01:00"),
            Instant {
                seconds: 0,
                nanos: 0
            }
        );
        assert_eq!(t("1969-12-31T23:59:59Z").seconds, -1);
        assert_eq!(t("2024-02-29T00:00:00Z").seconds, 1_709_164_800);
        assert_eq!(t("2000-03-01T00:00:00Z").seconds, 951_868_800);
        assert_eq!(t("2024-01-01T12:00:00Z").seconds, 1_704_110_400);
        assert_eq!(t("2024-01-01t12:00:00z"), t("2024-01-01T12:00:00Z"));
        assert_eq!(t("2024-01-01 12:00:00Z"), t("2024-01-01T12:00:00Z"));
        assert_eq!(t("2024-01-01T12:00:00-00:00"), t("2024-01-01T12:00:00Z"));
        assert_eq!(t("2024-01-01T12:00:00.5Z").nanos, 500_000_000);
        assert_eq!(t("2024-01-01T12:00:00.123456789Z").nanos, 123_456_789);
        assert_eq!(t("2016-12-31T23:59:60Z"), t("2017-01-01T00:00:00Z"));
        for bad in [
            "",
            "2024-01-01",
            "2024-01-01T12:00:00",
            "2024-01-01T12:00Z",
            "2024-1-01T12:00:00Z",
            "2024-01-01T12:00:00+0100",
            "2024-01-01T12:00:00+01",
            "2024-01-01T12:00:00+24:00",
            "2024-01-01T12:00:00.Z",
            "2024-01-01T12:00:00.1234567890Z",
            "2024-01-01T12:00:00Z ",
            "2024-13-01T12:00:00Z",
            "2024-00-01T12:00:00Z",
            "2023-02-29T12:00:00Z",
            "2024-04-31T12:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T12:60:00Z",
            "2024-01-01T12:00:61Z",
            "2024-01-01X12:00:00Z",
            "2024-01-01T12:00:00+01:00:00",
        ] {
            let err = parse_rfc3339(bad).unwrap_err();
            assert!(
                err.to_string().contains(&format!("`{bad}`")),
                "{bad}: {err}"
            );
        }
        assert!(parse_rfc3339("1900-02-29T00:00:00Z").is_err());
        assert!(parse_rfc3339("2000-02-29T00:00:00Z").is_ok());
    }
}
