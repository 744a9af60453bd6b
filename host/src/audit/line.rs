//! One line of the log: a JSON object whose last member is `hash`, the
//! SHA-256 of the line up to that member (the object closed right there),
//! and whose `prev` is the hash of the line before it (64 zeros on the
//! first line) and `seq` its 1-based line number. Sealing and checking a
//! line live together here, so the writer and `audit verify` cannot
//! disagree on either.

use sha2::{Digest, Sha256};
use std::fmt::Write as _;

/// The `prev` of a log's first line.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The longest line the log may hold, in bytes (its newline excluded).
pub const LINE_CAP: usize = 1 << 20;

/// What ends every sealed line after the hash: `"}`.
const CLOSE: &str = "\"}";
/// What comes before the hash: `,"hash":"`.
const OPEN: &str = ",\"hash\":\"";
/// The hash member and the close: `,"hash":"` + 64 hex digits + `"}`.
const SEAL_LEN: usize = OPEN.len() + 64 + CLOSE.len();

/// SHA-256 of `bytes`, as lowercase hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// `bytes` as lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// Seals `body` (a JSON object, serialized, without a `hash` member) into
/// a line: returns the line and its hash. (The format is no secret: what
/// makes a forgery show is the next line's `prev`, and the head kept
/// elsewhere.)
#[must_use]
pub fn seal(body: &str) -> (String, String) {
    let hash = sha256_hex(body.as_bytes());
    let open = body.strip_suffix('}').unwrap_or(body);
    let line = format!("{open}{OPEN}{hash}{CLOSE}");
    (line, hash)
}

/// What a sound line says about its place in the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Link {
    /// Its line number, as it claims.
    pub(crate) seq: u64,
    /// The hash it claims for the line before it.
    pub(crate) prev: String,
    /// Its own hash.
    pub(crate) hash: String,
}

/// Checks one line on its own (its bytes, without the newline): UTF-8,
/// length, JSON, an audit record, and its hash over its content. The error
/// is why not, for the caller to put after the line number.
pub(crate) fn check(bytes: &[u8]) -> Result<Link, String> {
    if bytes.len() > LINE_CAP {
        return Err(format!("longer than {LINE_CAP} bytes"));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "not valid UTF-8".to_owned())?;
    let value: serde_json::Value = serde_json::from_str(text).map_err(|_| "not JSON".to_owned())?;
    let field = |name: &str| value.get(name);
    let (Some(seq), Some(prev), Some(hash)) = (
        field("seq").and_then(serde_json::Value::as_u64),
        field("prev").and_then(serde_json::Value::as_str),
        field("hash").and_then(serde_json::Value::as_str),
    ) else {
        return Err("not an audit record (it lacks seq, prev or hash)".to_owned());
    };
    let sealed_as = text
        .len()
        .checked_sub(SEAL_LEN)
        .and_then(|at| text.get(at..).map(|seal| (at, seal)))
        .filter(|(_, seal)| {
            seal.starts_with(OPEN)
                && seal.ends_with(CLOSE)
                && seal.get(OPEN.len()..OPEN.len() + 64) == Some(hash)
        });
    let Some((at, _)) = sealed_as else {
        return Err("not sealed: its hash is not its last member".to_owned());
    };
    let body = format!("{}}}", &text[..at]);
    if sha256_hex(body.as_bytes()) != hash {
        return Err("edited: its content does not match its hash".to_owned());
    }
    Ok(Link {
        seq,
        prev: prev.to_owned(),
        hash: hash.to_owned(),
    })
}

/// Checks that `link`, found on line `number`, follows `previous` (the
/// link of the line before; `None` on the first line).
pub(crate) fn follows(link: &Link, number: u64, previous: Option<&Link>) -> Result<(), String> {
    let expected_prev = previous.map_or(GENESIS, |p| p.hash.as_str());
    if link.seq != number {
        return Err(format!(
            "its seq is {} where {number} was expected: a line before it was deleted, or lines were reordered",
            link.seq
        ));
    }
    if link.prev != expected_prev {
        return Err(match previous {
            Some(_) => {
                "its prev is not the hash of the line before it: that line was replaced, or lines were removed or reordered"
                    .to_owned()
            }
            None => "it does not start a chain: lines were removed from the start".to_owned(),
        });
    }
    Ok(())
}

/// `time` as RFC 3339 in UTC, to the millisecond (`2025-06-01T12:00:00.000Z`).
pub(crate) fn rfc3339(time: std::time::SystemTime) -> String {
    let since = time
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`, for days on or after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn body(seq: u64, prev: &str) -> String {
        serde_json::json!({"seq": seq, "prev": prev, "decision": "allowed"}).to_string()
    }

    #[test]
    fn a_sealed_line_checks_and_links_to_the_one_before() {
        let (first, first_hash) = seal(&body(1, GENESIS));
        let (second, _) = seal(&body(2, &first_hash));
        let one = check(first.as_bytes()).unwrap();
        let two = check(second.as_bytes()).unwrap();
        assert_eq!(one.hash, first_hash);
        assert_eq!(follows(&one, 1, None), Ok(()));
        assert_eq!(follows(&two, 2, Some(&one)), Ok(()));
        assert!(follows(&two, 1, None).unwrap_err().contains("seq is 2"));
        let (stray, _) = seal(&body(2, GENESIS));
        assert!(follows(&check(stray.as_bytes()).unwrap(), 2, Some(&one))
            .unwrap_err()
            .contains("prev is not the hash"));
    }

    #[test]
    fn an_edited_unsealed_or_foreign_line_is_refused_with_its_reason() {
        let (line, _) = seal(&body(1, GENESIS));
        let edited = line.replace("allowed", "blocked");
        assert!(check(edited.as_bytes()).unwrap_err().starts_with("edited"));
        assert_eq!(check(b"{not json").unwrap_err(), "not JSON");
        assert_eq!(check(&[0xff, 0xfe]).unwrap_err(), "not valid UTF-8");
        assert!(check(br#"{"seq":1}"#)
            .unwrap_err()
            .starts_with("not an audit record"));
        let moved = format!(
            r#"{{"hash":"{}","seq":1,"prev":"{GENESIS}"}}"#,
            "a".repeat(64)
        );
        assert!(check(moved.as_bytes())
            .unwrap_err()
            .starts_with("not sealed"));
        assert!(check(&vec![b' '; LINE_CAP + 1])
            .unwrap_err()
            .starts_with("longer than"));
    }

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let leap = UNIX_EPOCH + Duration::from_millis(951_782_400_123);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.123Z");
        let late = UNIX_EPOCH + Duration::from_secs(4_102_444_799);
        assert_eq!(rfc3339(late), "2099-12-31T23:59:59.000Z");
    }
}
