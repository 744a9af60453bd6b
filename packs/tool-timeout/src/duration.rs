//! Go-style durations: `50ms`, `1.5s`, `1m30s`.

use std::time::Duration;

/// Parses a Go-style duration: one or more `<number><unit>` with units
/// `ns`, `us` (or `µs`), `ms`, `s`, `m`, `h`; numbers may have a fraction.
///
/// # Errors
///
/// One line (`` `TEXT` is not a duration (e.g. 50ms, 1.5s, 2m, 1h30m) ``) when
/// `text` is empty, a number lacks its unit, a unit is not one of these, or the
/// total is out of range.
pub fn parse(text: &str) -> Result<Duration, String> {
    let malformed = || format!("`{text}` is not a duration (e.g. 50ms, 1.5s, 2m, 1h30m)");
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(malformed());
    }
    let mut total = 0.0_f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(malformed)?;
        let number: f64 = rest[..number_len].parse().map_err(|_| malformed())?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(malformed()),
        };
        total += number * seconds;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| malformed())
}

/// Formats `d` the way Go prints a duration: `50ms`, `1.5s`, `1m30s`,
/// `2h0m0s` (to the millisecond).
#[must_use]
pub fn format(d: Duration) -> String {
    let millis = d.as_millis();
    if millis < 1000 {
        return format!("{millis}ms");
    }
    let (hours, minutes) = (millis / 3_600_000, millis / 60_000 % 60);
    let seconds = millis % 60_000;
    let seconds = if seconds % 1000 == 0 {
        format!("{}s", seconds / 1000)
    } else {
        let text = format!("{}.{:03}", seconds / 1000, seconds % 1000);
        format!("{}s", text.trim_end_matches('0'))
    };
    match (hours, minutes) {
        (0, 0) => seconds,
        (0, m) => format!("{m}m{seconds}"),
        (h, m) => format!("{h}h{m}m{seconds}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_and_print_as_go_prints_them() {
        for (text, millis, shown) in [
            ("50ms", 50, "50ms"),
            ("1.5s", 1500, "1.5s"),
            ("30s", 30_000, "30s"),
            ("1m30s", 90_000, "1m30s"),
            ("2h", 7_200_000, "2h0m0s"),
            ("1h0m1.25s", 3_601_250, "1h0m1.25s"),
        ] {
            let parsed = parse(text).unwrap();
            assert_eq!(parsed, Duration::from_millis(millis), "{text}");
            assert_eq!(format(parsed), shown);
        }
        for bad in ["", "5", "ms", "5 parsecs", "1..5s", "-1s"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
