//! The writer: one sealed line per decision, appended to a file opened as
//! hostile, this turn's lines written out when the turn ends.

use super::line::{self, GENESIS, LINE_CAP};
use super::verify::{tail, FILE_CAP};
use super::AuditRecord;
use super::Change;
use crate::agent::{AgentEvent, EventBus};
use crate::interception::EventDecision;
use serde::Serialize;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// At most this many bytes of a reason (or a name) are recorded.
const TEXT_CAP: usize = 4096;

/// Why a log cannot be written. Displays as one line, without the path
/// (the caller says which file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// The file cannot be opened as a log.
    #[error("{0}")]
    Open(String),
    /// Its last line does not check: appending would extend a broken chain.
    #[error("{0}; run `chimera audit verify` on it to find the damage, and start a new log")]
    BrokenTail(String),
    /// A write failed; the lines of that turn (and after) are not in the log.
    #[error("cannot write to it: {0}")]
    Write(String),
}

/// Looks up the SHA-256 of the file a loaded pack came from, by entry-point name.
pub type PackHashes = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// An audit log being appended to. Cloning shares it.
#[derive(Clone)]
pub struct AuditLog {
    writer: Arc<Mutex<Writer>>,
}

/// The request of a gateway whose decisions a bus carries: what its lines
/// say instead of the run's session and turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// The request's id (the id of the reply the client got).
    pub request: String,
    /// The conversation it belongs to (the session id packs saw).
    pub session: String,
    /// Its turn in that conversation.
    pub turn: u64,
}

/// Where a log ends: what `audit verify` prints, and what to pass it as
/// `--expect-head`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Lines in the log.
    pub lines: u64,
    /// The last line's hash (`GENESIS` for an empty log).
    pub hash: String,
}

struct Writer {
    file: File,
    session: String,
    /// The last line's seq (its number) and hash: what the next line follows.
    seq: u64,
    head: String,
    /// This turn's lines, sealed, not yet written.
    pending: Vec<u8>,
    /// The current top-level turn (`None` before the first).
    turn: Option<u64>,
    /// The last question asked, for the line that records its answer.
    asked: Option<Asked>,
    /// The first write failure; nothing is written after it.
    failed: Option<String>,
    hashes: Option<PackHashes>,
}

/// What the answer line repeats of the question's.
struct Asked {
    interceptor: String,
    pack: Option<String>,
    tool: Option<String>,
    call_id: Option<String>,
}

/// Where a decision was made: the top-level session, or a sub-agent
/// (`depth`, the delegating call).
#[derive(Clone, Copy)]
struct Origin<'a> {
    depth: Option<u32>,
    parent_call_id: Option<&'a str>,
}

const TOP: Origin<'static> = Origin {
    depth: None,
    parent_call_id: None,
};

/// One line, before it is sealed. Field order is line order.
#[derive(Serialize)]
struct Body<'a> {
    seq: u64,
    prev: &'a str,
    time: String,
    session: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<&'a str>,
    turn: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    depth: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_call_id: Option<&'a str>,
    seam: &'a str,
    pack: Option<&'a str>,
    interceptor: &'a str,
    sha256: Option<String>,
    decision: &'a str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    monitor: bool,
    reason: &'a str,
    tool: Option<&'a str>,
    call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    answer: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    change: Option<&'a [Change]>,
    #[serde(skip_serializing_if = "is_zero")]
    change_omitted: usize,
}

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl AuditLog {
    /// Opens the log at `path` for appending, creating it (mode 0600 on
    /// Unix) when missing. Refused: a symlink, a directory, a FIFO or
    /// anything else that is not a regular file (never waited on), a file
    /// over the size cap, one another process is writing, and one whose
    /// last line does not check (appending would hide the damage).
    ///
    /// # Errors
    ///
    /// `AuditError::Open` when the file cannot be opened, created or locked, is
    /// not a regular file, or is over the size cap; `AuditError::BrokenTail`
    /// when its last line cannot be read, is incomplete or does not check.
    pub fn open(path: &Path) -> Result<AuditLog, AuditError> {
        let mut file = open_for_append(path).map_err(AuditError::Open)?;
        let len = file
            .metadata()
            .map_err(|e| AuditError::Open(format!("cannot read it: {e}")))?
            .len();
        if len > FILE_CAP {
            return Err(AuditError::Open(format!(
                "it is larger than {FILE_CAP} bytes: start a new log"
            )));
        }
        let last = tail(&mut file, len).map_err(AuditError::BrokenTail)?;
        let (seq, head) = last.map_or((0, GENESIS.to_owned()), |link| (link.seq, link.hash));
        Ok(AuditLog {
            writer: Arc::new(Mutex::new(Writer {
                file,
                session: session_id(),
                seq,
                head,
                pending: Vec::new(),
                turn: None,
                asked: None,
                failed: None,
                hashes: None,
            })),
        })
    }

    /// Records what `bus` carries: every interceptor decision (its audit
    /// channel: allows too, and what each replacement changed), the
    /// operator's answers (to packs' questions and to the permission
    /// policy's, with where each came from), and the turns, whose ends
    /// write the turn's lines out. `hashes` names the file hash of a
    /// loaded pack (`PluginManager::loaded_sha256`).
    pub fn attach(
        &self,
        bus: &EventBus,
        hashes: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) {
        self.set_pack_hashes(hashes);
        self.follow(bus);
    }

    /// Records every decision and event `bus` carries (the hashes named
    /// by [`set_pack_hashes`](Self::set_pack_hashes)).
    pub fn follow(&self, bus: &EventBus) {
        let writer = Arc::clone(&self.writer);
        bus.subscribe_audit(move |record| lock(&writer).decision(record, None));
        let writer = Arc::clone(&self.writer);
        bus.subscribe(move |event| lock(&writer).on_event(event));
    }

    /// Names the file hash of a loaded pack for the lines to carry
    /// (`PluginManager::loaded_sha256`).
    pub fn set_pack_hashes(&self, hashes: impl Fn(&str) -> Option<String> + Send + Sync + 'static) {
        self.lock().hashes = Some(Box::new(hashes));
    }

    /// Records every interceptor decision `bus` carries as decisions of
    /// `exchange` (a gateway's request): its lines name the request, and
    /// wait for [`write_out`](Self::write_out) when the request ends.
    pub fn attach_exchange(&self, bus: &EventBus, exchange: Exchange) {
        let writer = Arc::clone(&self.writer);
        bus.subscribe_audit(move |record| lock(&writer).decision(record, Some(&exchange)));
    }

    /// Writes out the lines waiting (a gateway's request ended); a write
    /// failure is kept for [`finish`](Self::finish) to report.
    pub fn write_out(&self) {
        self.lock().flush();
    }

    /// The id this run's lines carry as `session` (128 random bits, hex).
    #[must_use]
    pub fn session(&self) -> String {
        self.lock().session.clone()
    }

    /// Writes out what is pending; reports the first write failure of the
    /// run, else where the log now ends.
    ///
    /// # Errors
    ///
    /// `AuditError::Write` with the first write failure of the run; the lines
    /// of that turn and after it are not in the log.
    pub fn finish(&self) -> Result<Head, AuditError> {
        let mut writer = self.lock();
        writer.flush();
        if let Some(error) = &writer.failed {
            return Err(AuditError::Write(error.clone()));
        }
        let _ = writer.file.sync_data();
        Ok(Head {
            lines: writer.seq,
            hash: writer.head.clone(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Writer> {
        lock(&self.writer)
    }
}

fn lock(writer: &Mutex<Writer>) -> MutexGuard<'_, Writer> {
    writer.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Writer {
    /// An event of the transcript: turns, and the operator's answers.
    fn on_event(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::User { .. } => self.turn = Some(self.turn.map_or(0, |t| t + 1)),
            AgentEvent::RunEnd { .. } => self.flush(),
            AgentEvent::ApprovalAnswered { .. } => self.answered(TOP, event),
            AgentEvent::Nested(nested) => {
                let origin = Origin {
                    depth: Some(nested.depth),
                    parent_call_id: Some(&nested.parent_call_id),
                };
                self.answered(origin, &nested.event);
            }
            _ => {}
        }
    }

    /// A decision from the audit channel (of a gateway's `exchange`).
    fn decision(&mut self, record: &AuditRecord, exchange: Option<&Exchange>) {
        let event = &record.event;
        let origin = Origin {
            depth: (record.depth > 0).then_some(record.depth),
            parent_call_id: record.parent_call_id.as_deref(),
        };
        let pack = record
            .from_pack
            .then(|| event.interceptor.split_once('/'))
            .flatten()
            .map(|(pack, _)| pack.to_owned());
        let tool = (!event.tool_name.is_empty()).then_some(event.tool_name.as_str());
        let call_id = (!event.call_id.is_empty()).then_some(event.call_id.as_str());
        // A monitored interceptor's question is never put: no answer follows.
        if event.decision == EventDecision::Ask && !event.monitor {
            self.asked = Some(Asked {
                interceptor: event.interceptor.clone(),
                pack: pack.clone(),
                tool: tool.map(str::to_owned),
                call_id: call_id.map(str::to_owned),
            });
        }
        let changes = record.changes.as_ref();
        self.record(
            origin,
            Record {
                seam: event.seam,
                pack: pack.as_deref(),
                interceptor: &event.interceptor,
                decision: &event.decision.to_string(),
                monitor: event.monitor,
                reason: &event.reason,
                tool,
                call_id,
                answer: None,
                source: None,
                change: changes.map(|c| c.spans.as_slice()),
                change_omitted: changes.map_or(0, |c| c.omitted),
            },
            exchange,
        );
    }

    /// The operator's answer (an `approval_answered` event; any other is
    /// ignored) to the question asked last: a pack's, or the permission
    /// policy's.
    fn answered(&mut self, origin: Origin<'_>, event: &AgentEvent) {
        let AgentEvent::ApprovalAnswered {
            seam,
            interceptor,
            answer,
            source,
            ..
        } = event
        else {
            return;
        };
        let asked = self
            .asked
            .take()
            .filter(|asked| asked.interceptor == *interceptor);
        let asked = asked.as_ref();
        self.record(
            origin,
            Record {
                seam,
                pack: asked.and_then(|a| a.pack.as_deref()),
                interceptor,
                decision: "answered",
                monitor: false,
                reason: "",
                tool: asked.and_then(|a| a.tool.as_deref()),
                call_id: asked.and_then(|a| a.call_id.as_deref()),
                answer: Some(answer),
                source: Some(source),
                change: None,
                change_omitted: 0,
            },
            None,
        );
    }

    /// Seals one line after the last and keeps it for the turn's end.
    fn record(&mut self, origin: Origin<'_>, record: Record<'_>, exchange: Option<&Exchange>) {
        if self.failed.is_some() {
            return;
        }
        let sha256 = record
            .pack
            .and_then(|pack| self.hashes.as_ref().and_then(|hashes| hashes(pack)));
        let mut body = Body {
            seq: self.seq + 1,
            prev: &self.head,
            time: line::rfc3339(std::time::SystemTime::now()),
            session: exchange.map_or(self.session.as_str(), |e| capped(&e.session)),
            request: exchange.map(|e| capped(&e.request)),
            turn: exchange.map_or(self.turn.unwrap_or(0), |e| e.turn),
            depth: origin.depth,
            parent_call_id: origin.parent_call_id.map(capped),
            seam: record.seam,
            pack: record.pack.map(capped),
            interceptor: capped(record.interceptor),
            sha256,
            decision: record.decision,
            monitor: record.monitor,
            reason: capped(record.reason),
            tool: record.tool.map(capped),
            call_id: record.call_id.map(capped),
            answer: record.answer,
            source: record.source.map(capped),
            change: record.change,
            change_omitted: record.change_omitted,
        };
        let mut text = serde_json::to_string(&body).unwrap_or_default();
        if text.len() > LINE_CAP / 2 {
            // Escaping can grow the inserted text six-fold: drop the spans
            // rather than write a line `verify` would refuse.
            body.change_omitted += body.change.map_or(0, <[Change]>::len);
            body.change = None;
            text = serde_json::to_string(&body).unwrap_or_default();
        }
        let (sealed, hash) = line::seal(&text);
        self.pending.extend_from_slice(sealed.as_bytes());
        self.pending.push(b'\n');
        self.seq += 1;
        self.head = hash;
    }

    /// Writes the pending lines out in one write.
    fn flush(&mut self) {
        if self.pending.is_empty() || self.failed.is_some() {
            self.pending.clear();
            return;
        }
        let written = self
            .file
            .write_all(&self.pending)
            .and_then(|()| self.file.flush());
        self.pending.clear();
        if let Err(error) = written {
            tracing::warn!("the audit log cannot be written: {error}");
            self.failed = Some(error.to_string());
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.flush();
    }
}

/// The fields of a line that vary by what is recorded.
struct Record<'a> {
    seam: &'a str,
    pack: Option<&'a str>,
    interceptor: &'a str,
    decision: &'a str,
    /// The decision was recorded, not enacted (monitor mode).
    monitor: bool,
    reason: &'a str,
    tool: Option<&'a str>,
    call_id: Option<&'a str>,
    answer: Option<&'a str>,
    source: Option<&'a str>,
    change: Option<&'a [Change]>,
    change_omitted: usize,
}

/// `text`, cut to [`TEXT_CAP`] bytes at a character boundary.
fn capped(text: &str) -> &str {
    if text.len() <= TEXT_CAP {
        return text;
    }
    let mut cut = TEXT_CAP;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

/// 128 random bits, as hex: unique per run.
fn session_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No entropy source: the time and the process still make it unique here.
        let seed = format!("{:?}{}", std::time::SystemTime::now(), std::process::id());
        return line::sha256_hex(seed.as_bytes())[..32].to_owned();
    }
    line::hex(&bytes)
}

/// Opens `path` for reading and appending without following a symlink in
/// its place or waiting on a FIFO, creating it 0600 when missing, and
/// takes an exclusive lock on it; refuses anything but a regular file.
fn open_for_append(path: &Path) -> Result<File, String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).append(true).create(true);
    #[cfg(unix)]
    {
        use rustix::fs::OFlags;
        use std::os::unix::fs::OpenOptionsExt;
        options
            .mode(0o600)
            .custom_flags(i32::try_from((OFlags::NOFOLLOW | OFlags::NONBLOCK).bits()).unwrap_or(0));
    }
    #[cfg(not(unix))]
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err("it is a symlink".to_owned());
    }
    let file = options.open(path).map_err(|error| open_error(&error))?;
    let metadata = file
        .metadata()
        .map_err(|e| format!("cannot read it: {e}"))?;
    if !metadata.is_file() {
        return Err("not a regular file".to_owned());
    }
    #[cfg(unix)]
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
        |error| {
            if error == rustix::io::Errno::WOULDBLOCK {
                "another process is writing to it".to_owned()
            } else {
                format!("cannot lock it: {error}")
            }
        },
    )?;
    Ok(file)
}

/// The one-line reason an open failed.
fn open_error(error: &std::io::Error) -> String {
    #[cfg(unix)]
    {
        let errno = error
            .raw_os_error()
            .map(rustix::io::Errno::from_raw_os_error);
        if errno == Some(rustix::io::Errno::LOOP) {
            return "it is a symlink".to_owned();
        }
        if errno == Some(rustix::io::Errno::NXIO) {
            return "not a regular file".to_owned();
        }
    }
    if error.kind() == std::io::ErrorKind::IsADirectory {
        return "not a regular file (a directory)".to_owned();
    }
    format!("cannot open it: {error}")
}

#[cfg(test)]
mod tests {
    use super::super::verify::verify_file;
    use super::*;
    use crate::interception::InterceptorEvent;

    fn record(decision: EventDecision) -> AuditRecord {
        AuditRecord {
            event: InterceptorEvent {
                seam: "tool_call",
                decision,
                reason: String::new(),
                tool_name: "bash".to_owned(),
                call_id: "c1".to_owned(),
                interceptor: "plan-gate/gate".to_owned(),
                monitor: false,
            },
            from_pack: true,
            changes: None,
            depth: 0,
            parent_call_id: None,
        }
    }

    fn run_end() -> AgentEvent {
        AgentEvent::RunEnd {
            success: true,
            output: String::new(),
            reason: "completed".to_owned(),
            vetoed: false,
            vetoed_by: None,
            usage: crate::agent::RunUsage::default(),
        }
    }

    fn turn(bus: &EventBus, decisions: &[EventDecision]) {
        bus.publish(AgentEvent::User {
            content: "hi".to_owned(),
        });
        for decision in decisions {
            bus.publish_audit(record(*decision));
        }
        bus.publish(run_end());
    }

    #[test]
    fn lines_are_written_per_turn_and_a_second_run_continues_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let bus = EventBus::new();
        let log = AuditLog::open(&path).unwrap();
        log.attach(&bus, |name| (name == "plan-gate").then(|| "ab".repeat(32)));
        bus.publish(AgentEvent::User {
            content: "hi".to_owned(),
        });
        bus.publish_audit(record(EventDecision::Allowed));
        assert_eq!(
            std::fs::read(&path).unwrap().len(),
            0,
            "held until the turn ends"
        );
        bus.publish(run_end());
        let written = std::fs::read_to_string(&path).unwrap();
        let first: serde_json::Value =
            serde_json::from_str(written.lines().next().unwrap()).unwrap();
        assert_eq!(first["seq"], 1);
        assert_eq!(first["turn"], 0);
        assert_eq!(first["pack"], "plan-gate");
        assert_eq!(first["sha256"], "ab".repeat(32));
        assert_eq!(first["decision"], "allowed");
        assert_eq!(first["call_id"], "c1");
        turn(&bus, &[EventDecision::Blocked]);
        let head = log.finish().unwrap();
        drop(log);
        drop(bus);
        assert_eq!(head.lines, 2);

        let bus = EventBus::new();
        let again = AuditLog::open(&path).unwrap();
        again.attach(&bus, |_| None);
        turn(&bus, &[EventDecision::Replaced]);
        assert_eq!(again.finish().unwrap().lines, 3);
        let verified = verify_file(&path, Some(&head.hash)).unwrap();
        assert_eq!(verified.lines, 3);
        let last: serde_json::Value = serde_json::from_str(
            std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .nth(2)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(last["turn"], 0, "turns count per run");
        assert_ne!(last["session"], first["session"]);
    }

    #[test]
    fn a_log_with_a_broken_tail_or_held_by_another_writer_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        assert_eq!(
            AuditLog::open(&path).err(),
            Some(AuditError::Open(
                "another process is writing to it".to_owned()
            ))
        );
        drop(log);
        std::fs::write(&path, "{\"seq\":1}\n").unwrap();
        let refused = AuditLog::open(&path).err().unwrap().to_string();
        assert!(refused.contains("chimera audit verify"), "{refused}");
    }

    #[cfg(unix)]
    #[test]
    fn a_new_log_is_private_and_a_symlink_directory_or_fifo_is_refused_without_waiting() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        drop(AuditLog::open(&path).unwrap());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert_eq!(
            AuditLog::open(&link).err(),
            Some(AuditError::Open("it is a symlink".to_owned()))
        );
        assert!(AuditLog::open(dir.path())
            .err()
            .unwrap()
            .to_string()
            .starts_with("not a regular file"));
        let fifo = dir.path().join("fifo");
        crate::test_support::make_fifo(&fifo);
        assert_eq!(
            AuditLog::open(&fifo).err(),
            Some(AuditError::Open("not a regular file".to_owned()))
        );
    }
}
