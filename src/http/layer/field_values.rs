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

/// Header values for the pieces of `bytes`, one after the other, `lengths`
/// long, each checked as `HeaderValue::from_bytes` checks it and handed
/// to `each` with its position: copied into this thread's buffer in one
/// go, then cut, so that every value shares the buffer. `each` runs with
/// the buffer borrowed: it must not cut values itself.
pub(super) fn cut_values(
    bytes: &[u8],
    lengths: impl Iterator<Item = usize>,
    mut each: impl FnMut(usize, Result<HeaderValue, InvalidHeaderValue>),
) {
    BUFFER.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        let buffer = match &mut *buffer {
            Some(left) if left.capacity() >= bytes.len() => left,
            other => other.insert(BytesMut::with_capacity(CHUNK.max(bytes.len()))),
        };
        buffer.extend_from_slice(bytes);
        for (i, length) in lengths.enumerate() {
            let piece = buffer.split_to(length.min(buffer.len())).freeze();
            each(i, HeaderValue::from_maybe_shared(piece));
        }
        // Whatever `lengths` left uncut is not kept.
        buffer.clear();
    });
}

#[cfg(test)]
mod tests {
    use super::{cut_values, CHUNK};

    /// The values of `pieces`, written one after the other and cut.
    fn cut(pieces: &[&[u8]]) -> Vec<Result<Vec<u8>, ()>> {
        let bytes = pieces.concat();
        let mut values = Vec::new();
        cut_values(
            &bytes,
            pieces.iter().map(|piece| piece.len()),
            |i, value| {
                assert_eq!(i, values.len());
                values.push(value.map(|value| value.as_bytes().to_vec()).map_err(|_| ()));
            },
        );
        values
    }

    #[test]
    fn each_value_holds_its_own_bytes_across_buffers() {
        let mut kept = Vec::new();
        for i in 0..3 * CHUNK / 10 {
            let (first, second) = (format!("v={i:05}"), format!("w={i}"));
            let mut values = Vec::new();
            cut_values(
                format!("{first}{second}").as_bytes(),
                [first.len(), second.len()].into_iter(),
                |_, value| values.push(value.unwrap()),
            );
            kept.push((first, second, values));
        }
        for (first, second, values) in &kept {
            assert_eq!(values[0].as_bytes(), first.as_bytes());
            assert_eq!(values[1].as_bytes(), second.as_bytes());
        }
        let long = vec![b'x'; 3 * CHUNK];
        assert_eq!(
            cut(&[&long, b"after"]),
            [Ok(long.clone()), Ok(b"after".to_vec())]
        );
        assert_eq!(cut(&[b"next"]), [Ok(b"next".to_vec())]);
    }

    #[test]
    fn bytes_a_header_value_cannot_hold_are_refused_alone() {
        assert_eq!(
            cut(&[b"line\nbreak", b"\x7f", b"tab\tok", b"", b"fine"]),
            [
                Err(()),
                Err(()),
                Ok(b"tab\tok".to_vec()),
                Ok(Vec::new()),
                Ok(b"fine".to_vec())
            ]
        );
    }

    #[test]
    fn bytes_past_the_lengths_are_not_kept() {
        let mut values = Vec::new();
        cut_values(b"onetwo", [3].into_iter(), |_, value| {
            values.push(value.unwrap())
        });
        assert_eq!(values[0].as_bytes(), b"one");
        assert_eq!(cut(&[b"three"]), [Ok(b"three".to_vec())]);
    }
}
