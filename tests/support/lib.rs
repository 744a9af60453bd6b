//! Shared test support: builds the workspace's pack libraries once per test
//! run and says where they are.

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

/// The packages whose shared libraries (and, for the host, the `chimera`
/// binary) the tests use.
pub const PACK_PACKAGES: &[&str] = &[
    "chimera-fixture-pack",
    "chimera-not-a-pack",
    "chimera-hostile-pack",
    "chimera-host",
    "plan-gate",
    "redactor",
    "delegate-spawner",
];

/// The built `chimera` binary.
pub fn chimera_bin() -> PathBuf {
    packs_dir().join(format!("chimera{}", std::env::consts::EXE_SUFFIX))
}

/// Builds every pack package once per test run (a no-op when `cargo test
/// --workspace` already built them) and returns the artifact directory.
/// Panics with cargo's output when the build fails.
pub fn packs_dir() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = artifact_dir();
        let profile_is_release = dir.file_name().is_some_and(|n| n == "release");
        let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cargo
            .current_dir(workspace_root())
            .arg("build")
            .arg("--quiet");
        if profile_is_release {
            cargo.arg("--release");
        }
        for package in PACK_PACKAGES {
            cargo.args(["-p", package]);
        }
        let output = cargo.output().expect("run cargo build for the packs");
        assert!(
            output.status.success(),
            "building the packs failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        dir
    })
}

/// The shared library of `package` (`chimera-fixture-pack` → `…/libchimera_fixture_pack.so`).
pub fn pack_path(package: &str) -> PathBuf {
    packs_dir().join(chimera_host::plugins::platform::library_file_name(package))
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
        let profile_dir = artifact_dir();
        let target = profile_dir
            .parent()
            .expect("profile dir has a parent")
            .join("abi-fixtures");
        let release = profile_dir.file_name().is_some_and(|n| n == "release");
        for project in OUT_OF_TREE {
            let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
            cargo
                .current_dir(workspace_root().join(project))
                .args(["build", "--quiet", "--target-dir"])
                .arg(&target);
            if release {
                cargo.arg("--release");
            }
            let output = cargo.output().expect("run cargo build");
            assert!(
                output.status.success(),
                "building {project} failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        target.join(if release { "release" } else { "debug" })
    })
}

pub mod tools {
    //! Tools the scenarios use: `echo`, `dangerous_delete`, and fixed-output tools.

    use chimera_host::tools::{Tool, ToolContext};
    use chimera_host::types::ToolResult;
    use serde_json::{json, Value};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// `echo(message)` → `Echo: <message>`.
    pub struct Echo;

    impl Tool for Echo {
        fn name(&self) -> &str {
            "echo"
        }
        fn description(&self) -> &str {
            "Echoes its message."
        }
        fn parameters(&self) -> Value {
            json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]})
        }
        fn execute(&self, arguments: &Value, _cx: &ToolContext<'_>) -> ToolResult {
            ToolResult::ok(format!(
                "Echo: {}",
                arguments["message"].as_str().unwrap_or_default()
            ))
        }
    }

    /// `dangerous_delete()`: records that it ran, answers `deleted everything`.
    #[derive(Default, Clone)]
    pub struct Dangerous {
        /// Set when it ran.
        pub ran: Arc<AtomicBool>,
    }

    impl Dangerous {
        /// Whether it ran.
        pub fn ran(&self) -> bool {
            self.ran.load(Ordering::SeqCst)
        }
    }

    impl Tool for Dangerous {
        fn name(&self) -> &str {
            "dangerous_delete"
        }
        fn description(&self) -> &str {
            "Deletes everything."
        }
        fn parameters(&self) -> Value {
            json!({"type": "object", "properties": {}})
        }
        fn execute(&self, _arguments: &Value, _cx: &ToolContext<'_>) -> ToolResult {
            self.ran.store(true, Ordering::SeqCst);
            ToolResult::ok("deleted everything")
        }
    }

    /// A tool named `name` that always returns `output`.
    pub struct Fixed {
        /// Tool name.
        pub name: &'static str,
        /// Its output.
        pub output: &'static str,
    }

    impl Tool for Fixed {
        fn name(&self) -> &str {
            self.name
        }
        fn description(&self) -> &str {
            "Returns a fixed text."
        }
        fn parameters(&self) -> Value {
            json!({"type": "object", "properties": {}})
        }
        fn execute(&self, _arguments: &Value, _cx: &ToolContext<'_>) -> ToolResult {
            ToolResult::ok(self.output)
        }
    }
}

/// The fixture pack rebuilt with `CHIMERA_FIXTURE_TAG=v2`: a second,
/// genuinely different build of the same pack (its `BUILD_TAG` is `v2`),
/// built once per test run into `<target>/abi-fixtures`.
pub fn fixture_v2() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let profile_dir = artifact_dir();
            let target = profile_dir
                .parent()
                .expect("profile dir has a parent")
                .join("abi-fixtures");
            let release = profile_dir.file_name().is_some_and(|n| n == "release");
            let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
            cargo
                .current_dir(workspace_root())
                .env("CHIMERA_FIXTURE_TAG", "v2")
                .args([
                    "build",
                    "--quiet",
                    "-p",
                    "chimera-fixture-pack",
                    "--target-dir",
                ])
                .arg(&target);
            if release {
                cargo.arg("--release");
            }
            let output = cargo.output().expect("run cargo build");
            assert!(
                output.status.success(),
                "building the v2 fixture failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
            target.join(if release { "release" } else { "debug" }).join(
                chimera_host::plugins::platform::library_file_name("chimera-fixture-pack"),
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
