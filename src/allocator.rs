//! The gateway's global allocator: mimalloc, chosen by measurement
//! (bench/RESULTS.md: glibc's malloc and free were a fifth of the CPU per
//! forwarded request). Asked through its plain entry points whenever the
//! alignment is one that every mimalloc block has anyway: its aligned entry
//! point (which the `mimalloc` crate uses for everything) takes a slower,
//! generic path for blocks over 1 KiB, such as boxed futures and buffers.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// Every block mimalloc hands out is aligned to this (`MI_MAX_ALIGN_SIZE`).
const NATURAL: usize = 16;

pub(crate) struct Mimalloc;

// SAFETY: each call passes the layout's size (and, above `NATURAL`, its
// alignment) to the matching mimalloc function, whose blocks satisfy it;
// every block is freed by `mi_free`, which takes blocks of any entry point.
unsafe impl GlobalAlloc for Mimalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= NATURAL {
                mi::mi_malloc(layout.size()).cast()
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= NATURAL {
                mi::mi_zalloc(layout.size()).cast()
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from one of the functions above.
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from one of the functions above, with this
        // layout's alignment, which the new block keeps.
        unsafe {
            if layout.align() <= NATURAL {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}
