//! The buffer a response's header fields are written into: on the stack
//! while they fit, as they do for one or two policies with names of
//! ordinary length, and on the heap beyond. Every write is a bounds check
//! and a copy, where a growable vector's costs a capacity check and a
//! call to grow, and a small vector's adds a test of where it lives.

use std::ops::{Deref, Range};

/// Bytes held on the stack before the buffer moves to the heap.
const INLINE: usize = 320;

/// Bytes appended one slice at a time; reads as a byte slice.
pub(crate) struct FieldBuf {
    inline: [u8; INLINE],
    /// Bytes used of `inline`, until the buffer moves to the heap.
    len: usize,
    /// Everything written, once more than `inline` holds was.
    heap: Vec<u8>,
}

impl FieldBuf {
    /// An empty buffer.
    pub(crate) fn new() -> Self {
        Self {
            inline: [0; INLINE],
            len: 0,
            heap: Vec::new(),
        }
    }

    /// Appends `bytes`.
    #[inline]
    pub(crate) fn extend_from_slice(&mut self, bytes: &[u8]) {
        if self.fits(bytes.len()) {
            let end = self.len + bytes.len();
            self.inline[self.len..end].copy_from_slice(bytes);
            self.len = end;
        } else {
            self.extend_on_heap(bytes);
        }
    }

    /// Appends `byte`.
    #[inline]
    pub(crate) fn push(&mut self, byte: u8) {
        self.extend_from_slice(&[byte]);
    }

    /// Appends a copy of the bytes at `range`.
    pub(crate) fn extend_from_within(&mut self, range: Range<usize>) {
        if self.fits(range.len()) {
            self.inline.copy_within(range.clone(), self.len);
            self.len += range.len();
        } else {
            self.move_to_heap(range.len());
            self.heap.extend_from_within(range);
        }
    }

    /// Keeps the first `len` bytes (all of them if fewer).
    pub(crate) fn truncate(&mut self, len: usize) {
        if self.on_heap() {
            self.heap.truncate(len);
        } else {
            self.len = self.len.min(len);
        }
    }

    /// Whether everything written is on the heap: once moved there, the
    /// buffer stays.
    #[inline]
    fn on_heap(&self) -> bool {
        self.heap.capacity() != 0
    }

    /// Whether `more` bytes still fit on the stack.
    #[inline]
    fn fits(&self, more: usize) -> bool {
        !self.on_heap() && self.len + more <= INLINE
    }

    /// Appends `bytes` on the heap: out of line, as few responses come
    /// here.
    #[cold]
    #[inline(never)]
    fn extend_on_heap(&mut self, bytes: &[u8]) {
        self.move_to_heap(bytes.len());
        self.heap.extend_from_slice(bytes);
    }

    /// Moves what is on the stack to the heap, with room for `more`
    /// bytes after it, if it is not there yet.
    fn move_to_heap(&mut self, more: usize) {
        if !self.on_heap() {
            self.heap.reserve((self.len + more).max(2 * INLINE));
            self.heap.extend_from_slice(&self.inline[..self.len]);
        }
    }
}

impl Deref for FieldBuf {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        if self.on_heap() {
            &self.heap
        } else {
            &self.inline[..self.len]
        }
    }
}

impl Default for FieldBuf {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_read_back_in_order_across_the_move_to_the_heap() {
        let mut buf = FieldBuf::new();
        let mut expected = Vec::new();
        for i in 0..200u32 {
            let piece = i.to_string().repeat(i as usize % 7);
            buf.extend_from_slice(piece.as_bytes());
            buf.push(b',');
            expected.extend_from_slice(piece.as_bytes());
            expected.push(b',');
            assert_eq!(&buf[..], &expected[..], "after {i} pieces");
        }
        assert!(expected.len() > 2 * INLINE, "{} bytes", expected.len());
        buf.extend_from_within(3..9);
        expected.extend_from_within(3..9);
        assert_eq!(&buf[..], &expected[..]);
        buf.truncate(5);
        expected.truncate(5);
        assert_eq!(&buf[..], &expected[..]);
    }

    #[test]
    fn copies_within_on_the_stack_and_onto_the_heap() {
        let mut buf = FieldBuf::new();
        buf.extend_from_slice(b"0123456789");
        buf.extend_from_within(2..5);
        assert_eq!(&buf[..], b"0123456789234");
        let long = vec![b'y'; INLINE - buf.len() - 1];
        buf.extend_from_slice(&long);
        buf.extend_from_within(0..4);
        assert_eq!(buf.len(), INLINE + 3);
        assert_eq!(&buf[INLINE - 1..], b"0123");
    }

    #[test]
    fn a_slice_larger_than_the_stack_goes_to_the_heap_at_once() {
        let mut buf = FieldBuf::new();
        buf.extend_from_slice(b"ab");
        let long = vec![b'x'; 3 * INLINE];
        buf.extend_from_slice(&long);
        assert_eq!(buf.len(), 2 + 3 * INLINE);
        assert_eq!(&buf[..2], b"ab");
        buf.truncate(1);
        assert_eq!(&buf[..], b"a");
    }

    #[test]
    fn truncating_on_the_stack_never_grows() {
        let mut buf = FieldBuf::new();
        buf.extend_from_slice(b"abc");
        buf.truncate(10);
        assert_eq!(&buf[..], b"abc");
        buf.truncate(0);
        assert!(buf.is_empty());
    }
}
