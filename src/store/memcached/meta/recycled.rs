//! The buffers of meta-protocol calls, kept per thread for the next call:
//! a request's bytes and the list of its answers.
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
//! than [`LARGEST`] bytes: some 130 KiB a thread at most.

use std::cell::RefCell;
use std::thread::LocalKey;

/// Buffers of each kind kept per thread.
const KEEP: usize = 64;

/// The most bytes a kept buffer may hold; a larger one is freed.
const LARGEST: usize = 1024;

thread_local! {
    static BYTES: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// An empty byte buffer with room for `capacity` bytes: one this thread
/// kept, or a new one.
pub(super) fn bytes(capacity: usize) -> Vec<u8> {
    let mut bytes = take(&BYTES).unwrap_or_default();
    bytes.reserve(capacity);
    bytes
}

/// Keeps `bytes` for [`bytes`], emptied, if there is room.
pub(super) fn keep_bytes(mut bytes: Vec<u8>) {
    bytes.clear();
    keep(&BYTES, bytes, |bytes| bytes.capacity());
}

/// A buffer `pool` kept, if any (none while this thread's locals are
/// being destroyed).
pub(super) fn take<T: 'static>(pool: &'static LocalKey<RefCell<Vec<T>>>) -> Option<T> {
    pool.try_with(|kept| kept.borrow_mut().pop()).ok().flatten()
}

/// Keeps `buffer` (empty, `bytes` of it in use) in `pool` if it is small
/// enough and the pool has room; frees it otherwise.
pub(super) fn keep<T: 'static>(
    pool: &'static LocalKey<RefCell<Vec<T>>>,
    buffer: T,
    bytes: impl FnOnce(&T) -> usize,
) {
    let size = bytes(&buffer);
    if size == 0 || size > LARGEST {
        return;
    }
    let _ = pool.try_with(|kept| {
        let mut kept = kept.borrow_mut();
        if kept.len() < KEEP {
            kept.push(buffer);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_buffer_is_handed_out_again_empty() {
        let mut first = bytes(100);
        first.extend_from_slice(b"mg key v\r\n");
        let at = first.as_ptr();
        keep_bytes(first);
        let second = bytes(50);
        assert!(second.is_empty());
        assert_eq!(second.as_ptr(), at);
        assert!(second.capacity() >= 100);
    }

    #[test]
    fn large_and_surplus_buffers_are_freed() {
        while take(&BYTES).is_some() {}
        keep_bytes(Vec::with_capacity(LARGEST + 1));
        assert!(take(&BYTES).is_none());
        keep_bytes(Vec::new());
        assert!(take(&BYTES).is_none());
        for _ in 0..KEEP + 10 {
            keep_bytes(Vec::with_capacity(16));
        }
        let mut kept = 0;
        while take(&BYTES).is_some() {
            kept += 1;
        }
        assert_eq!(kept, KEEP);
    }
}
