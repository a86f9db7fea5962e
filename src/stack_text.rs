//! Short ASCII text built on the stack: keys and their suffixes, which
//! every decision writes, without an allocation.

use std::fmt;
use std::hash::{Hash, Hasher};

/// At most `N` bytes of ASCII, on the stack.
#[derive(Clone, Copy)]
pub(crate) struct StackText<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> StackText<N> {
    pub(crate) const fn new() -> Self {
        Self {
            bytes: [0; N],
            len: 0,
        }
    }

    /// Appends `part`.
    ///
    /// # Panics
    ///
    /// Past `N` bytes, and in debug builds if `part` is not ASCII: the
    /// callers' own bounds rule out the first, and the callers pass
    /// client ids, namespaces and suffixes they have checked, or digits.
    /// Should a byte beyond ASCII slip through in a release build, it is
    /// held, and [`as_str`](Self::as_str) panics.
    #[inline]
    pub(crate) fn push(&mut self, part: &[u8]) {
        let end = self.len + part.len();
        assert!(end <= N, "{:?} does not fit", String::from_utf8_lossy(part));
        debug_assert!(part.is_ascii(), "{part:?} is not ASCII");
        self.bytes[self.len..end].copy_from_slice(part);
        self.len = end;
    }

    /// Empties it.
    #[inline]
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    /// Appends one ASCII byte: a separator, without a copy call.
    #[inline]
    pub(crate) fn push_byte(&mut self, byte: u8) {
        assert!(self.len < N && byte.is_ascii(), "{byte:?} does not fit");
        self.bytes[self.len] = byte;
        self.len += 1;
    }

    /// Appends `value % 100` as two decimal digits ([`two_digits`]).
    pub(crate) fn push_two_digits(&mut self, value: u32) {
        let end = self.len + 2;
        assert!(end <= N, "2 digits do not fit");
        self.bytes[self.len..end].copy_from_slice(&two_digits(value));
        self.len = end;
    }

    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(self).expect("only ASCII is pushed")
    }
}

/// `value % 100` as two decimal digits, copied from a table: the calendar
/// fields of every key suffix (fewer instructions than dividing, under
/// callgrind).
pub(crate) fn two_digits(value: u32) -> [u8; 2] {
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let at = 2 * (value % 100) as usize;
    [PAIRS[at], PAIRS[at + 1]]
}

impl<const N: usize> std::ops::Deref for StackText<N> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl<const N: usize> AsRef<[u8]> for StackText<N> {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl<const N: usize> fmt::Debug for StackText<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl<const N: usize, T: AsRef<[u8]> + ?Sized> PartialEq<T> for StackText<N> {
    fn eq(&self, other: &T) -> bool {
        **self == *other.as_ref()
    }
}

impl<const N: usize> Eq for StackText<N> {}

impl<const N: usize> Hash for StackText<N> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_digits_from_the_table_are_the_decimal_ones() {
        for value in 0..250 {
            let mut text = StackText::<2>::new();
            text.push_two_digits(value);
            assert_eq!(text.as_str(), format!("{:02}", value % 100));
        }
    }

    #[test]
    fn holds_what_was_pushed_and_no_more() {
        let mut text = StackText::<8>::new();
        text.push(b"ab");
        text.push_two_digits(107);
        text.push_byte(b'7');
        assert_eq!(text, "ab077");
        assert_eq!(text.as_str(), "ab077");
        assert!(std::panic::catch_unwind(move || text.push(b"1234")).is_err());
        if cfg!(debug_assertions) {
            assert!(
                std::panic::catch_unwind(|| StackText::<8>::new().push("é".as_bytes())).is_err()
            );
        }
    }
}
