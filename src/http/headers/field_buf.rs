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
    /// Bytes used of `inline`, while `heap` is empty.
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
        let end = self.len + bytes.len();
        if end <= INLINE && self.heap.capacity() == 0 {
            self.inline[self.len..end].copy_from_slice(bytes);
            self.len = end;
        } else {
            self.extend_on_heap(bytes);
        }
    }

    /// Appends `byte`.
    #[inline]
    pub(crate) fn push(&mut self, byte: u8) {
        if self.len < INLINE && self.heap.capacity() == 0 {
            self.inline[self.len] = byte;
            self.len += 1;
        } else {
            self.extend_on_heap(&[byte]);
        }
    }

    /// Appends `bytes` on the heap, moving what is on the stack there
    /// first: out of line, as few responses come here.
    #[cold]
    #[inline(never)]
    fn extend_on_heap(&mut self, bytes: &[u8]) {
        if self.heap.capacity() == 0 {
            self.heap.reserve((self.len + bytes.len()).max(2 * INLINE));
            self.heap.extend_from_slice(&self.inline[..self.len]);
        }
        self.heap.extend_from_slice(bytes);
    }

    /// Appends a copy of the bytes at `range`.
    pub(crate) fn extend_from_within(&mut self, range: Range<usize>) {
        let end = self.len + range.len();
        if end <= INLINE && self.heap.capacity() == 0 {
            self.inline.copy_within(range, self.len);
            self.len = end;
        } else {
            self.extend_on_heap(&[]);
            self.heap.extend_from_within(range);
        }
    }

    /// Keeps the first `len` bytes (all of them if fewer).
    pub(crate) fn truncate(&mut self, len: usize) {
        if self.heap.capacity() == 0 {
            self.len = self.len.min(len);
        } else {
            self.heap.truncate(len);
        }
    }
}

impl Deref for FieldBuf {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        if self.heap.capacity() == 0 {
            &self.inline[..self.len]
        } else {
            &self.heap
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
