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
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

#[global_allocator]
static ALLOCATOR: Mimalloc = Mimalloc;

/// The alignment every block of at least this many bytes has from
/// mimalloc's plain calls (`MI_MAX_ALIGN_SIZE`: its `alloc.c` asserts each
/// block of 16 bytes or more starts 16-aligned, and one smaller is
/// aligned to its size class, a multiple of 8).
const PLAIN_ALIGN: usize = 16;

/// mimalloc through its plain calls wherever they give the alignment asked
/// (as the standard library's own allocator treats `malloc`), its aligned
/// ones only beyond. The `mimalloc` crate's allocator takes the aligned
/// path for every call: a check more for each, and an over-allocation
/// (`size + align - 1`, then aligned within) whenever the size's page has
/// no free block, a dozen times a gateway request.
struct Mimalloc;

/// Whether `align` comes with a block of `size` bytes from the plain calls.
fn plain(align: usize, size: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

/// A new block for `layout` from mimalloc's `plain_call` (of its size)
/// where [`plain`] allows, else from its `aligned_call`.
///
/// # Safety
///
/// `layout`'s size is not zero; the two calls are one of mimalloc's pairs.
#[allow(unsafe_code, reason = "mimalloc's calls have no safe wrapper")]
#[inline]
unsafe fn new_block(
    layout: Layout,
    plain_call: unsafe extern "C" fn(usize) -> *mut c_void,
    aligned_call: unsafe extern "C" fn(usize, usize) -> *mut c_void,
) -> *mut u8 {
    // SAFETY: the caller's; each call takes any size and a power of two.
    unsafe {
        if plain(layout.align(), layout.size()) {
            plain_call(layout.size()).cast()
        } else {
            aligned_call(layout.size(), layout.align()).cast()
        }
    }
}

#[allow(
    unsafe_code,
    reason = "a global allocator is an unsafe trait, and mimalloc's calls have no safe wrapper"
)]
// SAFETY: every call is mimalloc's, which returns null or a block of at
// least the size asked with the alignment asked (checked by `plain`
// before a plain call is taken), and frees or grows only blocks it gave.
unsafe impl GlobalAlloc for Mimalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above; `layout`'s size is not zero (the trait's rule).
        unsafe {
            new_block(
                layout,
                libmimalloc_sys::mi_malloc,
                libmimalloc_sys::mi_malloc_aligned,
            )
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe {
            new_block(
                layout,
                libmimalloc_sys::mi_zalloc,
                libmimalloc_sys::mi_zalloc_aligned,
            )
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator (the trait's rule).
        unsafe { libmimalloc_sys::mi_free(ptr.cast::<c_void>()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout`; a block
        // grown keeps its alignment only through the call that asks it.
        unsafe {
            if plain(layout.align(), new_size) {
                libmimalloc_sys::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                libmimalloc_sys::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align())
                    .cast()
            }
        }
    }
}

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
    use std::alloc::{GlobalAlloc, Layout};

    #[test]
    #[allow(
        unsafe_code,
        reason = "the allocator's own calls are the test's subject"
    )]
    fn every_block_has_the_alignment_asked() {
        // Sizes through mimalloc's small classes and past them, each
        // alignment up to a page: the plain calls for most, the aligned
        // ones beyond; each block grown, then shrunk, keeping its bytes.
        let allocator = super::Mimalloc;
        let aligned =
            |block: *mut u8, align: usize| !block.is_null() && block as usize % align == 0;
        for align in [1, 2, 4, 8, 16, 32, 64, 128, 4096] {
            for size in (1..=1200).chain([4095, 4097, 70_000, 1 << 20]) {
                let Ok(layout) = Layout::from_size_align(size, align) else {
                    continue;
                };
                let (grown, shrunk) = (size * 3 + 5, size.div_ceil(2));
                // SAFETY: layouts of non-zero size; each block is read
                // within its size and freed once, with the layout it has.
                unsafe {
                    let zeroed = allocator.alloc_zeroed(layout);
                    assert!(aligned(zeroed, align), "zeroed {size} by {align}");
                    assert!(std::slice::from_raw_parts(zeroed, size)
                        .iter()
                        .all(|&b| b == 0));
                    allocator.dealloc(zeroed, layout);
                    let block = allocator.alloc(layout);
                    assert!(aligned(block, align), "{size} by {align}");
                    block.write_bytes(0xa5, size);
                    let block = allocator.realloc(block, layout, grown);
                    assert!(aligned(block, align), "{size} to {grown} by {align}");
                    let layout = Layout::from_size_align(grown, align).unwrap();
                    let block = allocator.realloc(block, layout, shrunk);
                    assert!(aligned(block, align), "{grown} to {shrunk} by {align}");
                    let kept = std::slice::from_raw_parts(block, shrunk);
                    assert!(kept.iter().all(|&b| b == 0xa5), "{size} by {align} kept");
                    allocator.dealloc(block, Layout::from_size_align(shrunk, align).unwrap());
                }
            }
        }
    }

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
