//! 128-bit arithmetic that takes its 64-bit path when the values fit:
//! exact limits keep their estimates and times in 128 bits so that no
//! product overflows, yet for all but extreme quotas the values fit in 64,
//! where a division is one instruction and a 128-bit one a call of some
//! hundred instructions.
//!
//! Each wide form is a cold call of its own. Written inline, as in
//! `match u64::try_from(x) { Ok(x) => x as f64, Err(_) => x as f64 }`,
//! the compiler sees that both arms give the same value and keeps only
//! the 128-bit one.

/// `a / b`, rounded toward zero.
pub(crate) fn div_u128(a: u128, b: u128) -> u128 {
    match (u64::try_from(a), u64::try_from(b)) {
        (Ok(a), Ok(b)) => u128::from(a / b),
        _ => wide_div_u128(a, b),
    }
}

/// `a / b`, rounded toward zero.
pub(crate) fn div_i128(a: i128, b: i128) -> i128 {
    match (i64::try_from(a), i64::try_from(b)) {
        // `i64::MIN / -1` overflows in 64 bits, not in 128.
        (Ok(a), Ok(b)) if b != -1 => i128::from(a / b),
        _ => wide_div_i128(a, b),
    }
}

/// `value as f64`.
pub(crate) fn u128_to_f64(value: u128) -> f64 {
    match u64::try_from(value) {
        Ok(value) => value as f64,
        Err(_) => wide_u128_to_f64(value),
    }
}

/// `value as f64`.
pub(crate) fn i128_to_f64(value: i128) -> f64 {
    match i64::try_from(value) {
        Ok(value) => value as f64,
        Err(_) => wide_i128_to_f64(value),
    }
}

#[cold]
#[inline(never)]
fn wide_div_u128(a: u128, b: u128) -> u128 {
    a / b
}

#[cold]
#[inline(never)]
fn wide_div_i128(a: i128, b: i128) -> i128 {
    a / b
}

#[cold]
#[inline(never)]
fn wide_u128_to_f64(value: u128) -> f64 {
    value as f64
}

#[cold]
#[inline(never)]
fn wide_i128_to_f64(value: i128) -> f64 {
    value as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn edges_of_64_bits_divide_and_convert_as_128_bit_arithmetic_does() {
        let unsigned = [
            0,
            1,
            u128::from(u64::MAX),
            u128::from(u64::MAX) + 1,
            u128::MAX,
        ];
        for a in unsigned {
            for b in unsigned.into_iter().filter(|&b| b != 0) {
                assert_eq!(div_u128(a, b), a / b, "{a} / {b}");
            }
            assert_eq!(u128_to_f64(a).to_bits(), (a as f64).to_bits());
        }
        let signed = [
            i128::MIN,
            i128::from(i64::MIN) - 1,
            i128::from(i64::MIN),
            -1,
            0,
            1,
        ];
        for a in signed.into_iter().chain([i128::from(i64::MAX), i128::MAX]) {
            for b in [i128::from(i64::MIN), -1, 1, 7, i128::MAX] {
                if a == i128::MIN && b == -1 {
                    continue;
                }
                assert_eq!(div_i128(a, b), a / b, "{a} / {b}");
            }
            assert_eq!(i128_to_f64(a).to_bits(), (a as f64).to_bits());
        }
    }

    proptest! {
        #[test]
        fn any_values_divide_and_convert_as_128_bit_arithmetic_does(
            a in any::<u128>(), b in 1..=u128::MAX, c in any::<i128>(), d in any::<i128>(),
        ) {
            prop_assert_eq!(div_u128(a >> (a % 128), b >> (b % 120)), (a >> (a % 128)) / (b >> (b % 120)));
            prop_assert_eq!(u128_to_f64(a >> (a % 128)).to_bits(), ((a >> (a % 128)) as f64).to_bits());
            let (c, d) = (c >> (c.unsigned_abs() % 127), d >> (d.unsigned_abs() % 127));
            prop_assume!(d != 0 && !(c == i128::MIN && d == -1));
            prop_assert_eq!(div_i128(c, d), c / d);
            prop_assert_eq!(i128_to_f64(c).to_bits(), (c as f64).to_bits());
        }
    }
}
