//! The process's allocator: mimalloc (Microsoft, "mimalloc",
//! <https://github.com/microsoft/mimalloc>), entered by its plain functions
//! wherever no alignment beyond a machine word is asked for.
//!
//! The server and the benchmarks allocate small objects at a high rate
//! from several threads (commands, batches, channels, known states);
//! glibc's allocator spent about a quarter of the server's time there,
//! mimalloc a fraction of it. The `mimalloc` crate's allocator passes
//! every request to `mi_malloc_aligned`, whose fast path covers blocks of
//! at most 1 KiB: a larger block (a boxed command future is about 2.4 KB)
//! took its generic path, which over-allocates to align, about 270
//! instructions a time and 6% of a decision of the RESP server on
//! memcached (measured with callgrind). Every block `mi_malloc` returns is
//! aligned to at least a word, so a layout that asks no more goes there.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// The alignment every mimalloc block has at least.
const WORD: usize = std::mem::size_of::<usize>();

/// mimalloc as the global allocator.
pub struct Mimalloc;

// SAFETY: each method forwards to the mimalloc function for the same
// contract: `mi_malloc`, `mi_zalloc` and `mi_realloc` return blocks aligned
// to at least a word, used only for layouts that ask no more; the aligned
// variants for the others; `mi_free` frees blocks from either.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= WORD {
                mi::mi_malloc(layout.size()).cast()
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= WORD {
                mi::mi_zalloc(layout.size()).cast()
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, pointer: *mut u8, _layout: Layout) {
        // SAFETY: `pointer` came from this allocator.
        unsafe { mi::mi_free(pointer.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `pointer` came from this allocator with `layout`.
        unsafe {
            if layout.align() <= WORD {
                mi::mi_realloc(pointer.cast(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(pointer.cast(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_block_has_its_alignment_and_keeps_its_bytes() {
        let allocator = Mimalloc;
        for size in [1, 7, 8, 24, 100, 1_000, 2_368, 5_000, 100_000] {
            for align in [1, 2, 4, 8, 16, 64, 4_096] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero layout; the block is freed with it.
                unsafe {
                    let block = allocator.alloc(layout);
                    assert!(!block.is_null());
                    assert_eq!(block as usize % align, 0, "{size} bytes, align {align}");
                    block.write_bytes(0xa5, size);
                    let grown = allocator.realloc(block, layout, size * 3);
                    assert_eq!(grown as usize % align, 0, "grown {size}, align {align}");
                    assert!((0..size).all(|at| *grown.add(at) == 0xa5));
                    allocator.dealloc(grown, Layout::from_size_align(size * 3, align).unwrap());
                    let zeroed = allocator.alloc_zeroed(layout);
                    assert_eq!(zeroed as usize % align, 0);
                    assert!((0..size).all(|at| *zeroed.add(at) == 0));
                    allocator.dealloc(zeroed, layout);
                }
            }
        }
    }
}
