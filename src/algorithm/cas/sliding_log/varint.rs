//! The LEB128 varints a [`Log`](super::log::Log) stores its distances in:
//! written, read one at a time, and counted.

/// Appends `value` as a LEB128 varint.
pub(super) fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value & 0x7f) as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Takes the next varint off `rest`, saturating at `u64::MAX` (a varint
/// of more than 64 bits); what it holds when `rest` ends first.
#[inline]
pub(super) fn next_varint(rest: &mut &[u8]) -> u64 {
    let mut value: u64 = 0;
    let mut shift: u32 = 0;
    while let Some((&byte, tail)) = rest.split_first() {
        *rest = tail;
        let part = u64::from(byte & 0x7f);
        if shift <= 57 {
            value |= part << shift;
        } else if part != 0 && (shift > 63 || part > 1) {
            value = u64::MAX;
        } else {
            value |= part << shift.min(63);
        }
        if byte < 0x80 {
            break;
        }
        shift = shift.saturating_add(7);
    }
    value
}

/// How many varints `bytes` ends: the bytes without the continuation bit.
/// Counted in runs of 255 into a byte, which the compiler turns into wide
/// vector additions: the whole count costs little next to the value's
/// transfer, where counting into a `usize` took four bytes a step.
pub(super) fn last_bytes(bytes: &[u8]) -> usize {
    bytes
        .chunks(255)
        .map(|run| usize::from(run.iter().fold(0u8, |count, &byte| count + (!byte >> 7))))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_saturate_past_64_bits() {
        for value in [0, 1, 127, 128, 300, 1 << 35, u64::MAX - 1, u64::MAX] {
            let mut bytes = Vec::new();
            push_varint(&mut bytes, value);
            let mut rest = &bytes[..];
            assert_eq!(next_varint(&mut rest), value);
            assert!(rest.is_empty());
        }
        let read = |bytes: &[u8]| next_varint(&mut &bytes[..]);
        assert_eq!(read(&[0xac, 0x02]), 300);
        // Overlong but within 64 bits: its value.
        assert_eq!(read(&[0x80, 0x80, 0x00]), 0);
        // Past 64 bits: saturated.
        assert_eq!(
            read(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]),
            u64::MAX
        );
        assert_eq!(
            read(&[0x80; 11].iter().copied().chain([0x01]).collect::<Vec<_>>()),
            u64::MAX
        );
        // Cut short: what it holds so far.
        assert_eq!(read(&[0x85]), 5);
        // Reading stops at the varint's last byte.
        let mut two = &[0x05, 0x06][..];
        assert_eq!((next_varint(&mut two), next_varint(&mut two)), (5, 6));
    }

    #[test]
    fn last_bytes_are_counted_across_runs() {
        assert_eq!(last_bytes(&[]), 0);
        assert_eq!(last_bytes(&[0; 1000]), 1000);
        let mixed: Vec<u8> = (0..1000)
            .map(|i| if i % 3 == 0 { 0x80 } else { 0x7f })
            .collect();
        assert_eq!(last_bytes(&mixed), 666);
    }
}
