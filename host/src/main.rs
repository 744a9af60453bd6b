//! The `chimera` binary: the command line over the `chimera_host` library
//! (see `chimera --help`, and README.md for the outward contract).

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
