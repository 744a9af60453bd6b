//! The `chimera` binary: the command line over the `chimera_host` library
//! (see `chimera --help`, and README.md for the outward contract).

mod allocator;
mod cli;

fn main() -> std::process::ExitCode {
    allocator::set_options();
    cli::main()
}
