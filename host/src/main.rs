//! The `chimera` binary: see `chimera --help` and DESIGN §7.

fn main() -> std::process::ExitCode {
    chimera_host::cli::main()
}
