//! The server's allocator: mimalloc, through its plain entry points where
//! a layout allows. The binary installs it (`src/main.rs`, with mimalloc's
//! options), and so does the policy benchmark, so that the path allocates
//! there as it does in the server.

// The one place besides main.rs's mimalloc option where the workspace
// allows unsafe code: an allocator is unsafe by definition.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc,
    mi_zalloc_aligned,
};

/// mimalloc through its plain entry points where the layout allows.
/// `mimalloc::MiMalloc` calls the aligned ones for every layout, whose
/// checks cost more, and more again for blocks over 1 KiB; every block
/// `mi_malloc` returns is aligned to a word (its size classes are
/// multiples of one), so a layout aligned to at most a word needs nothing
/// more.
pub struct Mimalloc;

const WORD: usize = std::mem::size_of::<usize>();

// SAFETY: each call passes the layout's size and, where a word does not
// suffice, its alignment, to the mimalloc function that honours them;
// every block is freed by `mi_free`, which takes blocks from all of them.
unsafe impl GlobalAlloc for Mimalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let block = if layout.align() <= WORD {
            unsafe { mi_malloc(layout.size()) }
        } else {
            unsafe { mi_malloc_aligned(layout.size(), layout.align()) }
        };
        block.cast()
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let block = if layout.align() <= WORD {
            unsafe { mi_zalloc(layout.size()) }
        } else {
            unsafe { mi_zalloc_aligned(layout.size(), layout.align()) }
        };
        block.cast()
    }

    unsafe fn dealloc(&self, block: *mut u8, _layout: Layout) {
        unsafe { mi_free(block.cast()) }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = if layout.align() <= WORD {
            unsafe { mi_realloc(block.cast(), new_size) }
        } else {
            unsafe { mi_realloc_aligned(block.cast(), new_size, layout.align()) }
        };
        moved.cast()
    }
}
