//! The values of the header fields the layer adds, cut from one buffer
//! per thread rather than allocated one by one.
//!
//! `HeaderValue::from_bytes` allocates a block for every value, and the
//! response frees it once written: for the two fields of every allowed
//! request, two calls to the allocator and two frees. Here a thread
//! keeps a buffer of [`CHUNK`] bytes, and each value is the next piece of
//! it, a `Bytes` that shares the buffer: cutting one off counts a
//! reference, and the buffer is freed when its last value is. A new one
//! is allocated once the current one is used up, every few dozen
//! requests.

use std::cell::RefCell;

use ::http::header::InvalidHeaderValue;
use ::http::HeaderValue;
use bytes::BytesMut;

/// Bytes of each buffer: some forty responses' two fields of ordinary
/// length, and a value of any length fits in a buffer of its own.
const CHUNK: usize = 4096;

thread_local! {
    /// What is left of this thread's current buffer.
    static BUFFER: RefCell<Option<BytesMut>> = const { RefCell::new(None) };
}

/// A header value holding a copy of `bytes`, checked as
/// `HeaderValue::from_bytes` checks them, sharing this thread's buffer.
pub(super) fn field_value(bytes: &[u8]) -> Result<HeaderValue, InvalidHeaderValue> {
    let piece = BUFFER.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        let buffer = match &mut *buffer {
            Some(left) if left.capacity() >= bytes.len() => left,
            other => other.insert(BytesMut::with_capacity(CHUNK.max(bytes.len()))),
        };
        buffer.extend_from_slice(bytes);
        buffer.split().freeze()
    });
    HeaderValue::from_maybe_shared(piece)
}

#[cfg(test)]
mod tests {
    use super::{field_value, CHUNK};

    #[test]
    fn each_value_holds_its_own_bytes_across_buffers() {
        let values: Vec<_> = (0..3 * CHUNK / 10)
            .map(|i| (i, field_value(format!("v={i:05}").as_bytes()).unwrap()))
            .collect();
        for (i, value) in &values {
            assert_eq!(value.as_bytes(), format!("v={i:05}").as_bytes());
        }
        let long = vec![b'x'; 3 * CHUNK];
        assert_eq!(field_value(&long).unwrap().as_bytes(), &long[..]);
        assert_eq!(field_value(b"after").unwrap().as_bytes(), b"after");
    }

    #[test]
    fn bytes_a_header_value_cannot_hold_are_refused() {
        assert!(field_value(b"line\nbreak").is_err());
        assert!(field_value(b"\x7f").is_err());
        assert_eq!(field_value(b"tab\tok").unwrap().as_bytes(), b"tab\tok");
        assert_eq!(field_value(b"").unwrap().as_bytes(), b"");
    }
}
