//! The gateway's global allocator: mimalloc, chosen by measurement
//! (bench/RESULTS.md: glibc's malloc and free were a fifth of the CPU per
//! forwarded request). Asked through its plain entry points whenever the
//! alignment is one that every mimalloc block has anyway: its aligned entry
//! point (which the `mimalloc` crate uses for everything) takes a slower,
//! generic path for blocks over 1 KiB, such as boxed futures and buffers.
//!
//! Blocks of `MAPPED` bytes and more (a large backend body, and the result
//! kept in it) are mapped from the OS on their own, as glibc's malloc does
//! past its threshold: freed, they are unmapped at once, so memory that a
//! large result took is given back when the result has been written (left
//! to mimalloc, a freed huge block waited for a later purge that an idle
//! gateway never ran: RSS stayed 117 MiB higher 20 s after a 48 MiB
//! result). Grown or shrunk, such a block is remapped (`mremap`), never
//! copied: a body whose length was not known grows without a second copy of
//! itself. Nothing on the per-call path allocates anything this large; the
//! cost there is one comparison of the size.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// Every block mimalloc hands out is aligned to this (`MI_MAX_ALIGN_SIZE`).
const NATURAL: usize = 16;

/// Blocks at least this large (and aligned to at most a page) are mapped
/// on their own. The layout a block is freed or resized with is the one it
/// was made with (`GlobalAlloc`'s contract), so its size says which it is.
const MAPPED: usize = 1 << 20;

/// A mapped block's alignment: a page's.
const PAGE: usize = 4096;

fn is_mapped(size: usize, align: usize) -> bool {
    size >= MAPPED && align <= PAGE
}

/// A fresh mapping of `size` bytes (zeroed), or null.
fn map(size: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping at an address the kernel picks.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p.cast()
    }
}

/// Unmaps a block `map` or `remap` made with this size.
unsafe fn unmap(ptr: *mut u8, size: usize) {
    // SAFETY: the caller's block, of this size, no longer used.
    unsafe { libc::munmap(ptr.cast(), size) };
}

pub(crate) struct Mimalloc;

// SAFETY: each call passes the layout's size (and, above `NATURAL`, its
// alignment) to the matching mimalloc function, whose blocks satisfy it;
// every block is freed by `mi_free`, which takes blocks of any entry point.
unsafe impl GlobalAlloc for Mimalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if is_mapped(layout.size(), layout.align()) {
                map(layout.size())
            } else if layout.align() <= NATURAL {
                mi::mi_malloc(layout.size()).cast()
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if is_mapped(layout.size(), layout.align()) {
                // A fresh anonymous mapping is zeroed.
                map(layout.size())
            } else if layout.align() <= NATURAL {
                mi::mi_zalloc(layout.size()).cast()
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from one of the functions above, mapped if
        // and only if its layout says so.
        unsafe {
            if is_mapped(layout.size(), layout.align()) {
                unmap(ptr, layout.size());
            } else {
                mi::mi_free(ptr.cast::<c_void>())
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (was, will) = (
            is_mapped(layout.size(), layout.align()),
            is_mapped(new_size, layout.align()),
        );
        if was && will {
            // SAFETY: a mapping of `layout.size()` bytes, moved (its pages,
            // not its bytes) if it cannot grow where it is.
            let p =
                unsafe { libc::mremap(ptr.cast(), layout.size(), new_size, libc::MREMAP_MAYMOVE) };
            return if p == libc::MAP_FAILED {
                std::ptr::null_mut()
            } else {
                p.cast()
            };
        }
        if was || will {
            // Across the threshold: a new block, the bytes that both hold
            // copied, the old one freed.
            // SAFETY: the new layout has this one's valid alignment and a
            // non-zero size (`GlobalAlloc::realloc`'s contract).
            let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
            // SAFETY: as `alloc`, `dealloc`; both blocks are live here.
            unsafe {
                let p = self.alloc(new);
                if !p.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                return p;
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A block keeps its bytes as it grows past the mapping threshold,
    /// grows and shrinks as a mapping, and comes back below it.
    #[test]
    fn blocks_keep_their_bytes_across_the_mapping_threshold() {
        let a = Mimalloc;
        let layout = |size| Layout::from_size_align(size, 8).unwrap();
        let check = |p: *mut u8, n: usize| {
            // SAFETY: `p` holds at least `n` initialised bytes.
            let bytes = unsafe { std::slice::from_raw_parts(p, n) };
            assert!(bytes.iter().enumerate().all(|(i, b)| *b == i as u8));
        };
        // SAFETY: each block is used within its size and freed once, with
        // the layout it has.
        unsafe {
            let p = a.alloc(layout(1000));
            for i in 0..1000 {
                *p.add(i) = i as u8;
            }
            let p = a.realloc(p, layout(1000), 3 << 20);
            check(p, 1000);
            for i in 0..(3 << 20) {
                *p.add(i) = i as u8;
            }
            let p = a.realloc(p, layout(3 << 20), 9 << 20);
            check(p, 3 << 20);
            let p = a.realloc(p, layout(9 << 20), 2 << 20);
            check(p, 2 << 20);
            let p = a.realloc(p, layout(2 << 20), 500);
            check(p, 500);
            a.dealloc(p, layout(500));
            let z = a.alloc_zeroed(layout(2 << 20));
            assert!(
                std::slice::from_raw_parts(z, 2 << 20)
                    .iter()
                    .all(|b| *b == 0)
            );
            a.dealloc(z, layout(2 << 20));
        }
    }
}
