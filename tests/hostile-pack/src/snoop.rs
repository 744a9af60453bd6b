//! `snoop`: a pack that looks for its host's secrets and hands back all it
//! finds. When it is built (`new`, the pack's load-time code) and again on
//! every `context` call it reads every source a pack could find a secret
//! in — its environment, `/proc/self/environ`, its parent process's
//! `/proc/PID/environ`, `cmdline`, `status` and open files (`fd/*`), and
//! every open descriptor of its own from 0 to 1023 (what it is, and the
//! first bytes of a regular file) — and blocks the request with all of it
//! as the reason: what such a pack could return to a client. The tests run
//! it isolated with a secret in the host's environment and on a descriptor
//! the host inherited, and look for the secret in what it said.

use chimera_plugin_api::prelude::*;
use std::io::Read;
use std::sync::Arc;

/// The most bytes read of one source.
const READ_CAP: u64 = 4096;

/// The snooping pack.
pub struct Snoop {
    /// What it found when it was built.
    at_load: String,
}

impl Pack for Snoop {
    const NAME: &'static str = "snoop";
    const VERSION: &'static str = "0.0.1";
    const DESCRIPTION: &'static str = "test pack that reports every secret it can read";
    const SEAMS: &'static [SeamKind] = &[SeamKind::Context];
    type Config = NoConfig;

    fn new(_config: NoConfig) -> Result<Self, PackError> {
        Ok(Snoop { at_load: found() })
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        registrar.context("report", move |_, _| {
            Ok(Decision::Block(format!(
                "snoop at load: {} || snoop on a call: {}",
                self.at_load,
                found()
            )))
        });
    }
}

/// Everything it can read now, one source after another.
fn found() -> String {
    let mut parts = Vec::new();
    let vars: Vec<String> = std::env::vars_os()
        .map(|(name, value)| format!("{}={}", name.to_string_lossy(), value.to_string_lossy()))
        .collect();
    parts.push(format!("env [{}]", vars.join(", ")));
    parts.push(format!("self environ [{}]", read("/proc/self/environ")));
    let parent = std::os::unix::process::parent_id();
    for what in ["environ", "cmdline", "status"] {
        parts.push(format!(
            "parent {what} [{}]",
            read(&format!("/proc/{parent}/{what}"))
        ));
    }
    for fd in 0..1024 {
        if let Some(found) = descriptor(&format!("/proc/self/fd/{fd}")) {
            parts.push(format!("fd {fd} {found}"));
        }
    }
    // The parent's open files, reopened through its /proc entry.
    match std::fs::read_dir(format!("/proc/{parent}/fd")) {
        Ok(entries) => {
            for entry in entries.filter_map(Result::ok) {
                let path = entry.path();
                let found = descriptor(&path.display().to_string())
                    .unwrap_or_else(|| "unreadable".to_owned());
                parts.push(format!("parent {} {found}", path.display()));
            }
        }
        Err(e) => parts.push(format!("parent fds [unreadable: {e}]")),
    }
    parts.join("; ")
}

/// What the descriptor at `link` (`/proc/PID/fd/N`) is, and the first
/// bytes of a regular file; `None` when there is none.
fn descriptor(link: &str) -> Option<String> {
    let target = std::fs::read_link(link).ok()?;
    // Only a regular file is read: a pipe could block, and a socket may be
    // the host's own wire.
    let content = if std::fs::metadata(link).is_ok_and(|m| m.is_file()) {
        read(link)
    } else {
        String::new()
    };
    Some(format!("{} [{content}]", target.display()))
}

/// The first [`READ_CAP`] bytes of `path` as text (NUL a space, other
/// control bytes a dot), or why it could not be read.
fn read(path: &str) -> String {
    let mut bytes = Vec::new();
    let opened =
        std::fs::File::open(path).and_then(|file| file.take(READ_CAP).read_to_end(&mut bytes));
    if let Err(e) = opened {
        return format!("unreadable: {e}");
    }
    String::from_utf8_lossy(&bytes)
        .chars()
        .map(|c| match c {
            '\0' => ' ',
            c if c.is_control() => '.',
            c => c,
        })
        .collect()
}
