//! The buffers of meta-protocol calls, kept per thread for the next call:
//! a request's bytes and the list of its answers, each kind in a pool
//! beside its type.
//!
//! With many calls in flight at once (the 16 connections of a web
//! service, say), every call holds both, about 120 bytes each, in one
//! size class of glibc's allocator, whose per-thread cache keeps seven
//! blocks a class. The other allocations and frees went to the
//! allocator's bins: under callgrind, a web service's bare
//! `MemcachedStore::increment` per request cost 720 instructions less
//! with `GLIBC_TUNABLES=glibc.malloc.tcache_count=100`. Kept here, what
//! one call frees is the next one's, with no call to the allocator.
//!
//! At most [`KEEP`] buffers of each kind stay per thread, none larger
//! than [`LARGEST`] bytes and together at most [`BUDGET`] bytes: a
//! window's reads of a dozen sub-windows make a request of some 500
//! bytes and a list of answers of over 1 KiB, which a bound of 1 KiB a
//! buffer freed after every call (a SlidingWindow of n = 60 with 100,000
//! clients at one request in flight spent some 570 instructions a
//! decision growing the request's buffer again, callgrind).

use std::cell::RefCell;
use std::thread::LocalKey;

/// Buffers of each kind kept per thread.
const KEEP: usize = 64;

/// The most bytes a kept buffer may hold; a larger one is freed.
const LARGEST: usize = 8 << 10;

/// The most bytes one kind's kept buffers hold together, per thread.
const BUDGET: usize = 64 << 10;

/// A thread's kept buffers of one kind, and their bytes.
#[derive(Debug)]
pub(super) struct Pool<T> {
    buffers: Vec<Vec<T>>,
    bytes: usize,
}

/// A thread's kept buffers of one kind.
pub(super) type Kept<T> = RefCell<Pool<T>>;

/// No kept buffers yet: a `thread_local!` pool's `const` initializer.
pub(super) const fn none_kept<T>() -> Kept<T> {
    RefCell::new(Pool {
        buffers: Vec::new(),
        bytes: 0,
    })
}

/// The bytes `buffer` holds room for.
fn size<T>(buffer: &Vec<T>) -> usize {
    buffer.capacity() * std::mem::size_of::<T>()
}

/// An empty buffer with room for `capacity` items: one `pool` kept, or a
/// new one (as while this thread's locals are being destroyed).
pub(super) fn take<T: 'static>(pool: &'static LocalKey<Kept<T>>, capacity: usize) -> Vec<T> {
    let mut buffer = pool
        .try_with(|kept| {
            let mut kept = kept.borrow_mut();
            let buffer = kept.buffers.pop()?;
            kept.bytes -= size(&buffer);
            Some(buffer)
        })
        .ok()
        .flatten()
        .unwrap_or_default();
    buffer.reserve(capacity);
    buffer
}

/// Keeps `buffer`, emptied, in `pool` if it is small enough and the pool
/// has room; frees it otherwise.
pub(super) fn keep<T: 'static>(pool: &'static LocalKey<Kept<T>>, mut buffer: Vec<T>) {
    let size = size(&buffer);
    if size == 0 || size > LARGEST {
        return;
    }
    buffer.clear();
    let _ = pool.try_with(|kept| {
        let mut kept = kept.borrow_mut();
        if kept.buffers.len() < KEEP && kept.bytes + size <= BUDGET {
            kept.bytes += size;
            kept.buffers.push(buffer);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        static BYTES: Kept<u8> = const { none_kept() };
        static WORDS: Kept<u64> = const { none_kept() };
    }

    /// How many buffers `pool` keeps, taking them all out.
    fn drained<T: 'static>(pool: &'static LocalKey<Kept<T>>) -> usize {
        pool.with(|kept| {
            let mut kept = kept.borrow_mut();
            kept.bytes = 0;
            kept.buffers.drain(..).count()
        })
    }

    #[test]
    fn a_kept_buffer_is_handed_out_again_empty() {
        let mut first = take(&BYTES, 100);
        first.extend_from_slice(b"mg key v\r\n");
        let at = first.as_ptr();
        keep(&BYTES, first);
        let second = take(&BYTES, 50);
        assert!(second.is_empty());
        assert_eq!(second.as_ptr(), at);
        assert!(second.capacity() >= 100);
    }

    #[test]
    fn large_and_surplus_buffers_are_freed() {
        drained(&BYTES);
        keep(&BYTES, Vec::with_capacity(LARGEST + 1));
        assert_eq!(drained(&BYTES), 0);
        keep(&BYTES, Vec::new());
        assert_eq!(drained(&BYTES), 0);
        for _ in 0..KEEP + 10 {
            keep(&BYTES, Vec::with_capacity(16));
        }
        assert_eq!(drained(&BYTES), KEEP);
        // A buffer's size is its items' bytes, not its length in items.
        keep(&WORDS, Vec::with_capacity(LARGEST / 8 + 1));
        assert_eq!(drained(&WORDS), 0);
        keep(&WORDS, Vec::with_capacity(LARGEST / 8));
        assert_eq!(drained(&WORDS), 1);
    }

    #[test]
    fn the_kept_buffers_stay_within_their_budget() {
        drained(&BYTES);
        for _ in 0..KEEP {
            keep(&BYTES, Vec::with_capacity(LARGEST));
        }
        assert_eq!(drained(&BYTES), BUDGET / LARGEST);
        // A buffer taken out frees its share for the next one kept.
        for _ in 0..BUDGET / LARGEST {
            keep(&BYTES, Vec::with_capacity(LARGEST));
        }
        let taken = take(&BYTES, 1);
        keep(&BYTES, Vec::with_capacity(LARGEST));
        keep(&BYTES, Vec::with_capacity(LARGEST));
        assert_eq!(drained(&BYTES), BUDGET / LARGEST);
        drop(taken);
    }
}
