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
//! aligned to at least a word, so a layout that asks no more goes there;
//! one that asks up to 16 bytes goes there too, and is allocated again
//! with `mi_malloc_aligned` in the rare case the block is not aligned.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// The alignment every mimalloc block has at least.
const WORD: usize = std::mem::size_of::<usize>();

/// The largest alignment first asked of the plain functions: a block of
/// a size that is a multiple of 16 usually has it (mimalloc's own aligned
/// fast path relies on the same), and one that does not is allocated
/// again, aligned.
const TRIED: usize = 16;

/// mimalloc as the global allocator.
pub struct Mimalloc;

/// `block` if it is aligned to `align` (or null); otherwise it is freed and
/// `aligned` allocates instead.
///
/// # Safety
///
/// `block` is null or a live block from mimalloc.
unsafe fn aligned_or(
    block: *mut c_void,
    align: usize,
    aligned: impl FnOnce() -> *mut c_void,
) -> *mut u8 {
    if block.is_null() || (block as usize).is_multiple_of(align) {
        return block.cast();
    }
    // SAFETY: a live block from mimalloc, not used again.
    unsafe { mi::mi_free(block) };
    aligned().cast()
}

/// A block for `layout` from `plain` (word-aligned) or `aligned`, as the
/// impl below says; both zeroing or neither.
///
/// # Safety
///
/// As [`GlobalAlloc::alloc`].
#[inline(always)]
unsafe fn allocate(
    layout: Layout,
    plain: unsafe extern "C" fn(usize) -> *mut c_void,
    aligned: unsafe extern "C" fn(usize, usize) -> *mut c_void,
) -> *mut u8 {
    let (size, align) = (layout.size(), layout.align());
    // SAFETY: mimalloc's allocation functions, any size and alignment.
    unsafe {
        if align <= WORD {
            plain(size).cast()
        } else if align <= TRIED {
            aligned_or(plain(size), align, || aligned(size, align))
        } else {
            aligned(size, align).cast()
        }
    }
}

// SAFETY: each method forwards to the mimalloc function for the same
// contract: `mi_malloc`, `mi_zalloc` and `mi_realloc` return blocks aligned
// to at least a word, used for layouts that ask no more (`mi_malloc` and
// `mi_zalloc` also for up to 16, checked, and replaced by an aligned block
// when not aligned); the aligned variants serve the others; `mi_free`
// frees blocks from either.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe { allocate(layout, mi::mi_malloc, mi::mi_malloc_aligned) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe { allocate(layout, mi::mi_zalloc, mi::mi_zalloc_aligned) }
    }

    #[inline]
    unsafe fn dealloc(&self, pointer: *mut u8, _layout: Layout) {
        // SAFETY: `pointer` came from this allocator.
        unsafe { mi::mi_free(pointer.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        // SAFETY: `pointer` came from this allocator with `layout`. Growing
        // an over-aligned block is rare: the aligned function does it.
        unsafe {
            if align <= WORD {
                mi::mi_realloc(pointer.cast(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(pointer.cast(), new_size, align).cast()
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
        for size in [1, 7, 8, 24, 48, 100, 1_000, 2_368, 5_000, 100_000] {
            for align in [1, 2, 4, 8, 16, 32, 64, 4_096] {
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
