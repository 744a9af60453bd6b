//! The binary's allocator: mimalloc, told to give freed memory back to the
//! system at once and to commit its arenas only as they fill.
//!
//! A gateway request allocates and frees about a hundred small buffers;
//! glibc's allocator took a fifth of a bare request's instructions, and
//! mimalloc takes 8–9 % fewer of the whole request's (BENCHMARKS.md,
//! issue 42). Its defaults would cost the memory a gateway is held to:
//! freed pages are given back a second later, and only once it runs
//! again (an idle gateway kept what loading its packs had freed), and on
//! Linux its 1 GiB arenas are committed whole when reserved, which the
//! sandboxed pack host's `RLIMIT_DATA` would count. So both options are
//! set before the first allocation: in a constructor that runs ahead of
//! the Rust runtime's start, and again at `main` where no constructor
//! runs.
//!
//! Packs keep their own allocator: what crosses the stable ABI is freed by
//! the side that allocated it (`abi_stable`'s types carry their own).

use libmimalloc_sys::{mi_option_set, mi_option_t};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_arena_eager_commit` (mimalloc.h's `mi_option_e`, the same
/// place in its versions 2 and 3): 0, an arena's pages are committed as
/// they are used.
const ARENA_EAGER_COMMIT: mi_option_t = 4;

/// `mi_option_purge_delay`: 0, freed pages go back to the system at once.
const PURGE_DELAY: mi_option_t = 15;

/// The options, as [`set_options`] sets them.
const OPTIONS: [(mi_option_t, std::ffi::c_long); 2] = [(ARENA_EAGER_COMMIT, 0), (PURGE_DELAY, 0)];

/// Run by the loader before `main` (and before the runtime allocates).
#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "a constructor is an `.init_array` entry; this one only sets two of mimalloc's options"
)]
#[used]
#[link_section = ".init_array"]
static SET_BEFORE_MAIN: extern "C" fn() = set_options;

/// Sets [`OPTIONS`]; more than once does no harm.
#[allow(
    unsafe_code,
    reason = "mimalloc's option calls have no safe wrapper; they take two integers and touch only its own table"
)]
pub(crate) extern "C" fn set_options() {
    for (option, value) in OPTIONS {
        // SAFETY: `option` is one of mimalloc's options (see the
        // constants above); setting one only writes its table entry.
        unsafe { mi_option_set(option, value) };
    }
}

/// Whether the options hold as [`set_options`] sets them.
#[cfg(test)]
#[allow(
    unsafe_code,
    reason = "mimalloc's option calls have no safe wrapper; reading one touches only its own table"
)]
pub(crate) fn options_hold() -> bool {
    OPTIONS.iter().all(|&(option, value)| {
        // SAFETY: as in `set_options`; a read writes nothing.
        unsafe { libmimalloc_sys::mi_option_get(option) == value }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_options_are_set_before_main() {
        // This test binary's `main` is the test harness's, which never
        // calls `set_options`: only the constructor can have set them.
        #[cfg(target_os = "linux")]
        assert!(super::options_hold());
        super::set_options();
        assert!(super::options_hold());
    }
}
