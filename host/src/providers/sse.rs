//! Server-sent events, read from a blocking body: the framing only (`data:`
//! lines joined, a blank line ends an event). Written by hand because the
//! SSE crates are async; this is the whole of the format the providers use.

use std::io::BufRead;

/// One event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Event {
    /// The `event:` field (empty when absent).
    pub(crate) kind: String,
    /// The `data:` lines, joined with `\n`.
    pub(crate) data: String,
}

/// Calls `on_event` for each complete event; `on_event` returns false to stop.
pub(crate) fn read_events(
    reader: impl BufRead,
    mut on_event: impl FnMut(Event) -> bool,
) -> std::io::Result<()> {
    let mut event = Event::default();
    let mut has_data = false;
    for line in reader.lines() {
        let line = line?;
        let line = line.strip_suffix('\r').unwrap_or(&line);
        if line.is_empty() {
            if has_data && !on_event(std::mem::take(&mut event)) {
                return Ok(());
            }
            event = Event::default();
            has_data = false;
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "data" => {
                if has_data {
                    event.data.push('\n');
                }
                event.data.push_str(value);
                has_data = true;
            }
            "event" => event.kind = value.to_owned(),
            _ => {}
        }
    }
    if has_data {
        on_event(event);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_framed_by_blank_lines_and_data_lines_join() {
        let text =
            ": comment\r\ndata: one\r\n\r\nevent: delta\ndata: two\ndata: three\n\ndata:four";
        let mut seen = Vec::new();
        read_events(text.as_bytes(), |e| {
            seen.push(e);
            true
        })
        .unwrap();
        assert_eq!(
            seen,
            [
                Event {
                    kind: String::new(),
                    data: "one".into()
                },
                Event {
                    kind: "delta".into(),
                    data: "two\nthree".into()
                },
                Event {
                    kind: String::new(),
                    data: "four".into()
                },
            ]
        );
    }
}
