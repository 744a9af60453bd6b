//! Shared test support: builds the workspace's pack libraries once per test
//! run and says where they are.

#![allow(
    clippy::must_use_candidate,
    clippy::missing_panics_doc,
    clippy::format_push_string,
    reason = "test support: its helpers panic on a broken set-up by design, and every result is used"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_owned()
}

/// The directory cargo puts this profile's final artifacts in
/// (`target/debug`), found from the running test binary (`target/debug/deps/…`).
pub fn artifact_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary lives in <target>/<profile>/deps")
        .to_owned()
}

/// The built `chimera` binary.
pub fn chimera_bin() -> PathBuf {
    packs_dir().join(format!("chimera{}", std::env::consts::EXE_SUFFIX))
}

fn release() -> bool {
    artifact_dir().file_name().is_some_and(|n| n == "release")
}

/// `<target>/abi-fixtures`: where projects built apart from the workspace go.
fn fixtures_target() -> PathBuf {
    artifact_dir()
        .parent()
        .expect("profile dir has a parent")
        .join("abi-fixtures")
}

/// Runs `cargo build --quiet <args>` in `dir` with this profile; panics
/// with cargo's output when it fails.
fn cargo_build(dir: &Path, args: &[&str], env: &[(&str, &str)], what: &str) {
    cargo(dir, "build", args, env, what);
}

/// Runs `cargo <command> --quiet <args>` in `dir` with this profile;
/// panics with cargo's output when it fails.
fn cargo(dir: &Path, command: &str, args: &[&str], env: &[(&str, &str)], what: &str) {
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo.current_dir(dir).args([command, "--quiet"]).args(args);
    // What cargo set for this test or bench (its package's directory,
    // name, version) is not the build's: ring's build script watches some
    // of it, so a build inheriting it would rebuild ring and all above it,
    // and the user's next plain `cargo build` would rebuild them again.
    for (key, _) in std::env::vars_os() {
        if let Some(key) = key.to_str().filter(|key| package_variable(key)) {
            cargo.env_remove(key);
        }
    }
    if release() {
        cargo.arg("--release");
    }
    for (key, value) in env {
        cargo.env(key, value);
    }
    let output = cargo.output().expect("run cargo build");
    assert!(
        output.status.success(),
        "building {what} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Whether `key` is one of the variables cargo sets for the package whose
/// test or bench is running.
fn package_variable(key: &str) -> bool {
    key.starts_with("CARGO_PKG_")
        || matches!(
            key,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_CRATE_NAME"
                | "CARGO_PRIMARY_PACKAGE"
        )
}

/// Builds the workspace once per test run, as a user does (`cargo build
/// --workspace`, with this profile; little is left to do after `cargo test
/// --workspace`), and returns the artifact directory: the `chimera` binary
/// and the bundled packs beside it, and no test pack (see
/// [`test_packs_dir`]). One build, before any test runs the binary: a
/// later build with other packages selected could relink what a running
/// test uses.
pub fn packs_dir() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        cargo_build(&workspace_root(), &["--workspace"], &[], "the workspace");
        artifact_dir()
    })
}

/// The test packs: the test double, a pack with load-time code, and a
/// library that is no pack. Workspace members, so they are linted and
/// locked with the rest, but built there as plain Rust libraries only
/// (the fixture is also linked into the tests, to load it in-process):
/// their shared libraries are built by the tests alone, into
/// [`test_packs_dir`], so no release build puts a test pack beside the
/// `chimera` binary.
pub const TEST_PACKS: &[&str] = &[
    "chimera-fixture-pack",
    "chimera-not-a-pack",
    "chimera-hostile-pack",
];

/// Builds the [`TEST_PACKS`]' shared libraries once per test run and
/// returns the directory holding them (under `<target>/abi-fixtures`, where
/// only the tests look).
pub fn test_packs_dir() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = fixtures_output().join("test-packs");
        for package in TEST_PACKS {
            shared_library(package, &[], &dir);
        }
        dir
    })
}

/// Both directories of built packs: the bundled ones and the test packs,
/// for a plugin manager that loads either by name.
pub fn pack_dirs() -> Vec<PathBuf> {
    vec![packs_dir().to_owned(), test_packs_dir().to_owned()]
}

/// Makes a FIFO at `path`: what a hostile file in a path's place looks
/// like (opening it for reading would wait for a writer).
#[cfg(unix)]
pub fn make_fifo(path: impl AsRef<Path>) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path.as_ref(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("make a FIFO");
}

/// The shared library of `package` (`chimera-fixture-pack` → `…/libchimera_fixture_pack.so`):
/// in [`test_packs_dir`] for a test pack, else in [`packs_dir`].
pub fn pack_path(package: &str) -> PathBuf {
    let dir = if TEST_PACKS.contains(&package) {
        test_packs_dir()
    } else {
        packs_dir()
    };
    dir.join(chimera_host::plugins::platform::library_file_name(package))
}

/// `<target>/abi-fixtures/<profile>`: where cargo puts what it builds there.
fn fixtures_output() -> PathBuf {
    fixtures_target().join(if release() { "release" } else { "debug" })
}

/// Builds workspace package `package` as a shared library (`cargo rustc
/// --crate-type cdylib`) into `<target>/abi-fixtures` with `env` set, and
/// copies it into `into`; returns the copy. One build at a time: two builds
/// of one package (the fixture and its `v2`) write the same file there.
fn shared_library(package: &str, env: &[(&str, &str)], into: &Path) -> PathBuf {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let target_arg = fixtures_target().display().to_string();
    cargo(
        &workspace_root(),
        "rustc",
        &[
            "-p",
            package,
            "--lib",
            "--crate-type",
            "cdylib",
            "--target-dir",
            &target_arg,
        ],
        env,
        package,
    );
    let file = chimera_host::plugins::platform::library_file_name(package);
    std::fs::create_dir_all(into).expect("create the test packs' directory");
    let copy = into.join(&file);
    let temporary = into.join(format!(".{file}.tmp"));
    std::fs::copy(fixtures_output().join(&file), &temporary).expect("copy the built library");
    std::fs::rename(&temporary, &copy).expect("rename it into place");
    copy
}

/// Projects built outside the workspace, each on its own, into
/// `<target>/abi-fixtures`: packs built against the frozen ABI snapshot, with
/// a deliberately different layout, and the out-of-tree example pack.
pub const OUT_OF_TREE: &[&str] = &[
    "tests/abi-fixtures/frozen-pack",
    "tests/abi-fixtures/mismatch-pack",
    "examples/third-party-pack",
];

/// Builds the [`OUT_OF_TREE`] projects once per test run and returns the
/// directory holding their libraries.
pub fn out_of_tree_dir() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let target = fixtures_target();
        let target_arg = target.display().to_string();
        for project in OUT_OF_TREE {
            cargo_build(
                &workspace_root().join(project),
                &["--target-dir", &target_arg],
                &[],
                project,
            );
        }
        target.join(if release() { "release" } else { "debug" })
    })
}

/// `<target>/abi-fixtures`, for a test that builds a project of its own
/// apart from the workspace: there it shares the compiled dependencies of
/// the [`OUT_OF_TREE`] projects, and its libraries land beside theirs in
/// [`out_of_tree_dir`].
pub fn out_of_tree_target() -> PathBuf {
    fixtures_target()
}

/// The cargo flags that build with this test run's profile (`--release`
/// for a release run, none for a debug one).
pub fn profile_args() -> &'static [&'static str] {
    if release() {
        &["--release"]
    } else {
        &[]
    }
}

pub mod tools;

/// The fixture pack rebuilt with `CHIMERA_FIXTURE_TAG=v2`: a second,
/// genuinely different build of the same pack (its `BUILD_TAG` is `v2`),
/// built once per test run into `<target>/abi-fixtures`.
pub fn fixture_v2() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            shared_library(
                "chimera-fixture-pack",
                &[("CHIMERA_FIXTURE_TAG", "v2")],
                &fixtures_output().join("fixture-v2"),
            )
        })
        .clone()
}

/// Publishes `bytes` as `dir/name` the way a careful writer does: write a
/// temporary file, then rename it into place.
pub fn publish(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let target = dir.join(name);
    let temporary = dir.join(format!(".{name}.tmp"));
    std::fs::write(&temporary, bytes).expect("write the temporary file");
    std::fs::rename(&temporary, &target).expect("rename into place");
    target
}

/// Every pack the workspace ships, by entry-point name: the twelve gates
/// and the three Chimera packs.
pub const SHIPPED_PACKS: &[&str] = &[
    "approval-policy",
    "content-safety",
    "context-window",
    "delegate-spawner",
    "endless-loop",
    "json-schema",
    "output-length",
    "plan-gate",
    "prompt-injection",
    "rate-limiter",
    "redactor",
    "stop-words",
    "token-budget",
    "tool-filter",
    "tool-timeout",
];

pub mod clients;

/// The Codex CLI, pinned, run as `codex exec` against a base URL.
pub mod codex;

pub mod http;

pub mod mcp;

pub mod nginx;

pub mod slow_http;

pub mod cli;

pub mod python;

pub mod real_parts;

pub mod redis;

/// The Responses wire as a loopback model speaks it.
pub mod responses;

pub mod serve;

/// The stateful example pack (`examples/stateful-pack`, entry point
/// `call-quota`), built once per test run beside the other packs.
pub fn stateful_pack_path() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = packs_dir();
            cargo_build(
                &workspace_root(),
                &["-p", "stateful-pack"],
                &[],
                "the stateful example pack",
            );
            dir.join(chimera_host::plugins::platform::library_file_name(
                "stateful-pack",
            ))
        })
        .clone()
}

/// Writes `text` to `path` unless it already holds exactly that (so cargo
/// sees an unchanged file as unchanged).
fn write_if_changed(path: &Path, text: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::create_dir_all(path.parent().expect("a file in a directory"))
            .expect("create the directory");
        std::fs::write(path, text).expect("write the file");
    }
}

/// Copies every file under `from` to the same place under `to`, leaving
/// files that already match alone.
fn copy_sources(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read the source directory") {
        let path = entry.expect("a directory entry").path();
        let target = to.join(path.file_name().expect("a named entry"));
        if path.is_dir() {
            copy_sources(&path, &target);
        } else {
            write_if_changed(
                &target,
                &std::fs::read_to_string(&path).expect("a source file"),
            );
        }
    }
}

/// The frozen-ABI fixture pack as if its snapshot had been released as
/// `chimera-plugin-api` `version`: the same sources, so the same layout;
/// only the crate version (recorded in the root module and in every type's
/// layout) differs. Its entry point is `frozen-fixture-<version>` with the
/// dots as dashes (`frozen-fixture-0-1-9`), so it never clashes with the
/// fixture itself. Built once per version per test run into
/// `<target>/abi-fixtures`; returns the library.
pub fn frozen_pack_released_as(version: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, path)) = built.iter().find(|(v, _)| v == version) {
        return path.clone();
    }
    let slug = version.replace('.', "-");
    let fixtures = workspace_root().join("tests/abi-fixtures");
    let root = fixtures_target().join("released").join(&slug);
    let read = |path: &str| std::fs::read_to_string(fixtures.join(path)).expect("fixture file");
    copy_sources(
        &fixtures.join("frozen-api/src"),
        &root.join("frozen-api/src"),
    );
    let api_manifest = read("frozen-api/Cargo.toml");
    assert!(api_manifest.contains("\nversion = \"0.1.0\"\n"));
    write_if_changed(
        &root.join("frozen-api/Cargo.toml"),
        &api_manifest.replace(
            "\nversion = \"0.1.0\"\n",
            &format!("\nversion = \"{version}\"\n"),
        ),
    );
    let pack_source = read("pack.rs");
    assert!(pack_source.contains("\"frozen-fixture\""));
    write_if_changed(
        &root.join("pack/pack.rs"),
        &pack_source.replace("\"frozen-fixture\"", &format!("\"frozen-fixture-{slug}\"")),
    );
    let package = format!("frozen-pack-{slug}");
    write_if_changed(
        &root.join("pack/Cargo.toml"),
        &format!(
            "[package]\nname = \"{package}\"\nversion = \"1.0.0\"\nedition = \"2021\"\npublish = false\n\n\
             [workspace]\n\n[lib]\ncrate-type = [\"cdylib\"]\npath = \"pack.rs\"\n\n\
             [dependencies]\nchimera-plugin-api = {{ path = \"../frozen-api\" }}\nabi_stable = \"0.11.3\"\n"
        ),
    );
    // The fixture's own lock: the same dependency versions, already built.
    if !root.join("pack/Cargo.lock").exists() {
        std::fs::copy(
            fixtures.join("frozen-pack/Cargo.lock"),
            root.join("pack/Cargo.lock"),
        )
        .expect("copy the fixture's lock file");
    }
    let target = fixtures_target();
    cargo_build(
        &root.join("pack"),
        &["--target-dir", &target.display().to_string()],
        &[],
        &format!("the frozen fixture released as {version}"),
    );
    let path = target
        .join(if release() { "release" } else { "debug" })
        .join(chimera_host::plugins::platform::library_file_name(&package));
    built.push((version.to_owned(), path.clone()));
    path
}
