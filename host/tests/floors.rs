//! The module floors: `host/src`'s top-level modules stand on numbered
//! floors (the table under "Floors" in ARCHITECTURE.md), and a module
//! imports only from floors below its own. Within every directory module
//! (host's, the plugin API's and every pack crate's under `packs/`), the
//! sibling files do not import one another in a cycle.
//!
//! The check reads source text, not the compiler's view: every path that
//! starts `crate::`, `super::` or `self::` outside a comment (in `use`
//! lines, brace groups included, and in expressions) is resolved to the
//! deepest module it names. A directory's `mod.rs` is its facade: what it
//! re-exports is not an edge between its children.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A module's path below its crate root (`["agent", "react"]`).
type ModPath = Vec<String>;

/// One source file: its module and the modules its paths name.
struct File {
    path: PathBuf,
    module: ModPath,
    targets: Vec<(ModPath, usize)>,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a file is, below `root` (`src/`): `lib.rs`/`main.rs` are
/// the root, `x/mod.rs` is `x`, `x/y.rs` is `x::y`.
fn module_of(root: &Path, file: &Path) -> ModPath {
    let relative = file.strip_prefix(root).expect("a file under the root");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_owned());
    }
    parts
}

/// The code of a line, without its `//` comment (doc comments included).
fn code_of(line: &str) -> &str {
    match line.find("//") {
        Some(at) => &line[..at],
        None => line,
    }
}

/// Every `crate::`/`super::`/`self::` path in `code`, brace groups of a
/// `use` expanded one level deep (`crate::{a, b::c}` gives both).
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let rest = &code[at..];
        let starts = ["crate::", "super::", "self::"]
            .iter()
            .find(|head| rest.starts_with(**head));
        let boundary = at == 0 || {
            let before = bytes[at - 1];
            !(before.is_ascii_alphanumeric() || before == b'_')
        };
        let Some(head) = starts.filter(|_| boundary) else {
            at += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        let mut segments = vec![head.trim_end_matches("::").to_owned()];
        let mut cursor = at + head.len();
        loop {
            let tail = &code[cursor..];
            if tail.starts_with('{') {
                let close = tail.find('}').unwrap_or(tail.len());
                for item in tail[1..close].split(',') {
                    let mut full = segments.clone();
                    full.extend(
                        item.trim()
                            .split("::")
                            .map(|s| s.trim().to_owned())
                            .filter(|s| !s.is_empty() && s != "{"),
                    );
                    found.push(full);
                }
                cursor += close;
                break;
            }
            let ident: String = tail
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if ident.is_empty() {
                break;
            }
            cursor += ident.len();
            segments.push(ident);
            if code[cursor..].starts_with("::") {
                cursor += 2;
            } else {
                break;
            }
        }
        if segments.len() > 1 {
            found.push(segments);
        }
        at = cursor.max(at + 1);
    }
    found
}

/// Resolves `path` as written in module `here` to the deepest module of
/// `known` it names (a `mod.rs` is its directory's module, so its
/// `super` is the directory's parent).
fn resolve(here: &ModPath, path: &[String], known: &BTreeSet<ModPath>) -> ModPath {
    let mut base: ModPath = here.clone();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        _ => {}
    }
    let mut target = base.clone();
    let mut deepest = base;
    for segment in rest {
        target.push(segment.clone());
        if known.contains(&target) {
            deepest.clone_from(&target);
        } else {
            break;
        }
    }
    deepest
}

fn read_crate(root: &Path) -> Vec<File> {
    let mut paths = Vec::new();
    rust_files(root, &mut paths);
    let known: BTreeSet<ModPath> = paths.iter().map(|p| module_of(root, p)).collect();
    paths
        .into_iter()
        .map(|path| {
            let module = module_of(root, &path);
            let text = fs::read_to_string(&path).expect("a readable source file");
            let mut targets = Vec::new();
            for (number, line) in text.lines().enumerate() {
                for found in paths_in(code_of(line)) {
                    targets.push((resolve(&module, &found, &known), number + 1));
                }
            }
            File {
                path,
                module,
                targets,
            }
        })
        .collect()
}

/// The floor table from ARCHITECTURE.md: `| N | a, b, c |` rows under the
/// heading `### Floors`.
fn floors() -> BTreeMap<String, u32> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md");
    let text = fs::read_to_string(&doc).expect("ARCHITECTURE.md beside the workspace");
    let section = text
        .split("### Floors")
        .nth(1)
        .expect("ARCHITECTURE.md has a `### Floors` section");
    let mut floors = BTreeMap::new();
    for line in section.lines().skip_while(|l| !l.starts_with('|')) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let Ok(floor) = cells[0].parse::<u32>() else {
            continue;
        };
        for module in cells[1].split(',') {
            let module = module.trim().trim_matches('`');
            floors.insert(module.to_owned(), floor);
        }
    }
    assert!(floors.len() > 5, "the floor table has rows: {floors:?}");
    floors
}

#[test]
fn host_modules_import_only_from_lower_floors() {
    let floors = floors();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = read_crate(&root);
    let mut upward = Vec::new();
    for file in &files {
        let Some(from) = file.module.first() else {
            continue;
        };
        let Some(&own) = floors.get(from) else {
            upward.push(format!(
                "{}: module `{from}` has no floor",
                file.path.display()
            ));
            continue;
        };
        for (target, line) in &file.targets {
            let Some(to) = target.first().filter(|to| *to != from) else {
                continue;
            };
            match floors.get(to) {
                Some(&floor) if floor < own => {}
                Some(&floor) => upward.push(format!(
                    "{}:{line}: `{from}` (floor {own}) imports `{to}` (floor {floor})",
                    file.path.display()
                )),
                None => upward.push(format!(
                    "{}:{line}: `{to}` has no floor in ARCHITECTURE.md",
                    file.path.display()
                )),
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports across the floors:\n{}",
        upward.join("\n")
    );
}

/// The cycles among the children of each directory module.
fn sibling_cycles(files: &[File]) -> Vec<String> {
    let mut edges: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in files {
        for (target, _) in &file.targets {
            let shared = file
                .module
                .iter()
                .zip(target)
                .take_while(|(a, b)| a == b)
                .count();
            // Only between two different children of one parent; the
            // parent's own file (its facade) is not a child.
            if shared < file.module.len() && shared < target.len() {
                edges
                    .entry(file.module[..shared].to_vec())
                    .or_default()
                    .entry(file.module[shared].clone())
                    .or_default()
                    .insert(target[shared].clone());
            }
        }
    }
    let mut cycles = Vec::new();
    for (parent, graph) in &edges {
        for start in graph.keys() {
            // A path from a child back to itself is a cycle.
            let mut stack: Vec<(String, Vec<String>)> = vec![(start.clone(), vec![start.clone()])];
            let mut seen = BTreeSet::new();
            while let Some((node, trail)) = stack.pop() {
                for next in graph.get(&node).into_iter().flatten() {
                    if next == start {
                        let mut shown = trail.clone();
                        shown.push(start.clone());
                        cycles.push(format!("{}: {}", parent.join("::"), shown.join(" → ")));
                    } else if seen.insert(next.clone()) {
                        let mut longer = trail.clone();
                        longer.push(next.clone());
                        stack.push((next.clone(), longer));
                    }
                }
            }
        }
    }
    cycles
}

/// The `src` directory of every pack crate under `packs/`.
fn pack_roots() -> Vec<PathBuf> {
    let packs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs");
    let mut roots: Vec<PathBuf> = fs::read_dir(&packs)
        .unwrap_or_else(|e| panic!("{}: {e}", packs.display()))
        .map(|entry| entry.expect("a directory entry").path().join("src"))
        .filter(|src| src.is_dir())
        .collect();
    roots.sort();
    roots
}

#[test]
fn no_directory_module_has_an_import_cycle() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cycles = Vec::new();
    let mut roots = vec![manifest.join("src"), manifest.join("../plugin-api/src")];
    roots.extend(pack_roots());
    assert!(roots.len() > 2, "no pack crate found under packs/");
    for root in roots {
        let shown = root.display().to_string();
        cycles.extend(
            sibling_cycles(&read_crate(&root))
                .into_iter()
                .map(|cycle| format!("{shown} {cycle}")),
        );
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn the_path_reader_sees_groups_nesting_and_ignores_comments() {
    let found = paths_in(code_of(
        "use crate::{agent::Session, types, files::read}; // crate::audit",
    ));
    assert_eq!(
        found,
        vec![
            vec!["crate", "agent", "Session"],
            vec!["crate", "types"],
            vec!["crate", "files", "read"],
        ]
    );
    assert_eq!(
        paths_in("let x = super::super::outcome::Run;"),
        vec![vec!["super", "super", "outcome", "Run"]]
    );
    assert!(paths_in(code_of("pub(crate) fn f() {} // super::x")).is_empty());
    let known: BTreeSet<ModPath> = [
        vec!["agent".to_owned()],
        vec!["agent".into(), "outcome".into()],
    ]
    .into_iter()
    .collect();
    let here = vec![
        "agent".to_owned(),
        "strategies".to_owned(),
        "retry".to_owned(),
    ];
    let path: Vec<String> = ["super", "super", "outcome", "Run"]
        .map(String::from)
        .to_vec();
    assert_eq!(resolve(&here, &path, &known), vec!["agent", "outcome"]);
}

#[test]
fn a_cycle_between_siblings_is_found() {
    let file = |module: &[&str], target: &[&str]| File {
        path: PathBuf::from(module.join("/")),
        module: module.iter().map(|s| (*s).to_owned()).collect(),
        targets: vec![(target.iter().map(|s| (*s).to_owned()).collect(), 1)],
    };
    let files = [
        file(&["agent", "react"], &["agent", "session"]),
        file(&["agent", "session"], &["agent", "compaction"]),
        file(&["agent", "compaction"], &["agent", "react"]),
        file(&["agent"], &["agent", "react"]),
    ];
    let cycles = sibling_cycles(&files);
    assert!(
        cycles
            .iter()
            .any(|c| c == "agent: react → session → compaction → react"),
        "{cycles:?}"
    );
    assert!(sibling_cycles(&files[..2]).is_empty());
}
