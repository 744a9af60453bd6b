//! How a setting is read when the file writes it in a form of its own: a
//! path relative to the file, a table where the flag takes JSON or
//! `NAME=VALUE` words, `[mcp.servers.NAME]` tables where `--mcp` takes
//! `NAME=COMMAND|URL`. Each is named on its field
//! (`#[serde(deserialize_with = …)]`).

use chimera_host::config::McpServerEntry;
use chimera_host::state::FailPolicy;
use figment::value::magic::RelativePathBuf;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::Deserialize;
use std::fmt;
use std::path::PathBuf;

/// A path: relative to the configuration file's directory when the file
/// gave it, as given otherwise.
pub(super) fn relative_path<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<PathBuf>, D::Error> {
    Ok(Option::<RelativePathBuf>::deserialize(deserializer)?.map(|path| path.relative()))
}

/// Paths, each as [`relative_path`] reads one.
pub(super) fn relative_paths<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<PathBuf>, D::Error> {
    Ok(Vec::<RelativePathBuf>::deserialize(deserializer)?
        .iter()
        .map(RelativePathBuf::relative)
        .collect())
}

/// JSON text: as the flag gives it, or a table the file gives, as JSON.
pub(super) fn json_text<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    Ok(
        Option::<serde_json::Value>::deserialize(deserializer)?.map(|value| match value {
            serde_json::Value::String(text) => text,
            other => other.to_string(),
        }),
    )
}

/// `NAME=POLICY` words: as the flags give them, or a table of `NAME =
/// POLICY` the file gives (each policy checked).
pub(super) fn policies<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<String>, D::Error> {
    struct Policies;
    impl<'de> Visitor<'de> for Policies {
        type Value = Vec<String>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a table of NAME = \"fail_closed\" | \"fail_open\"")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
            let mut words = Vec::new();
            while let Some(word) = seq.next_element()? {
                words.push(word);
            }
            Ok(words)
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<String>, A::Error> {
            let mut words = Vec::new();
            while let Some((pack, policy)) = map.next_entry::<String, FailPolicy>()? {
                words.push(format!("{pack}={}", policy.name()));
            }
            Ok(words)
        }
    }
    deserializer.deserialize_any(Policies)
}

/// One MCP server a session offers.
#[derive(Debug, Clone)]
pub(crate) enum McpServer {
    /// `--mcp NAME=COMMAND|URL`, as given.
    Flag(String),
    /// `[mcp.servers.NAME]`, by name.
    Entry(String, McpServerEntry),
}

/// `--mcp`'s value (checked when the servers start).
#[allow(
    clippy::unnecessary_wraps,
    reason = "clap's value parsers return a Result"
)]
pub(super) fn mcp_flag(text: &str) -> Result<McpServer, String> {
    Ok(McpServer::Flag(text.to_owned()))
}

/// How `mcp.servers` is written and read: the `--mcp` words as a list, the
/// file's servers as a table (shown as NAME → its command line or URL).
pub(super) mod mcp_servers {
    use super::{
        fmt, Deserializer, MapAccess, McpServer, McpServerEntry, SeqAccess, SerializeMap,
        SerializeSeq, Serializer, Visitor,
    };

    /// How the server is reached, in one string.
    fn reached(entry: &McpServerEntry) -> String {
        match (&entry.command, &entry.url) {
            (Some(command), _) => std::iter::once(command)
                .chain(entry.args.iter().flatten())
                .cloned()
                .collect::<Vec<_>>()
                .join(" "),
            (None, url) => url.clone().unwrap_or_default(),
        }
    }

    /// The `--mcp` words as a list; else the file's servers as a table.
    pub(crate) fn serialize<S: Serializer>(
        servers: &[McpServer],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let flags: Vec<&String> = servers
            .iter()
            .filter_map(|server| match server {
                McpServer::Flag(flag) => Some(flag),
                McpServer::Entry(..) => None,
            })
            .collect();
        if !flags.is_empty() {
            let mut seq = serializer.serialize_seq(Some(flags.len()))?;
            for flag in flags {
                seq.serialize_element(flag)?;
            }
            return seq.end();
        }
        let mut map = serializer.serialize_map(Some(servers.len()))?;
        for server in servers {
            if let McpServer::Entry(name, entry) = server {
                map.serialize_entry(name, &reached(entry))?;
            }
        }
        map.end()
    }

    /// A list of `--mcp` words, or a table of servers by name.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<McpServer>, D::Error> {
        struct Servers;
        impl<'de> Visitor<'de> for Servers {
            type Value = Vec<McpServer>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of [mcp.servers.NAME] tables")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut servers = Vec::new();
                while let Some(flag) = seq.next_element()? {
                    servers.push(McpServer::Flag(flag));
                }
                Ok(servers)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut servers = Vec::new();
                while let Some((name, entry)) = map.next_entry()? {
                    servers.push(McpServer::Entry(name, entry));
                }
                Ok(servers)
            }
        }
        deserializer.deserialize_any(Servers)
    }
}
