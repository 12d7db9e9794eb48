//! Exact reading of Kubernetes resource quantities as GPU counts.
//!
//! `nvidia.com/gpu` is an integer extended resource, and `"1e0"`, `"2000m"`,
//! `"0.5k"` are all valid spellings of whole numbers: a policy that reads
//! counts with floats or a lenient parser can disagree with what the API
//! server accepted. So the grammar of `k8s.io/apimachinery/pkg/api/resource`
//! (split by [`kubernetes_cel::quantity::syntax`]) is evaluated exactly, in
//! integer arithmetic, checked or saturating (the lint below).

#![deny(clippy::arithmetic_side_effects)]

use crate::document::Json;

use kubernetes_cel::quantity::syntax::{self as quantity, Suffix};

/// Longest string accepted as a quantity. Kubernetes rejects quantities far
/// shorter than this; the cap bounds the work done on hostile input.
const MAX_QUANTITY_LEN: usize = 256;

/// Decimal digits of `u64::MAX` (18446744073709551615). A value with more
/// integer digits than this cannot be a valid count.
const U64_MAX_DIGITS: usize = 20;

/// What a quantity in `resources.limits` / `resources.requests` says as a
/// GPU count: anything but a whole number in a `u64` is
/// [`GpuCount::Invalid`], never rounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuCount {
    /// A whole, non-negative number of devices.
    Whole(u64),
    /// Not usable as a device count; the reason says why.
    Invalid(QuantityError),
}

/// Why a quantity is not usable as a GPU count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Not accepted by the Kubernetes quantity grammar (or not a string/number in JSON).
    #[error("is not a Kubernetes quantity")]
    Malformed,
    /// A valid quantity below zero.
    #[error("is negative")]
    Negative,
    /// A valid quantity with a non-zero fractional part (e.g. `500m`).
    #[error("is not a whole number")]
    Fractional,
    /// A valid whole quantity larger than `u64::MAX`, or too large to evaluate.
    #[error("is too large")]
    TooLarge,
}

impl GpuCount {
    /// Reads a quantity as it appears in raw pod JSON: a string
    /// ([`GpuCount::parse`]) or a number, taken as the API server decodes
    /// it (a float is whole only when integral and within `u64`). Anything
    /// else is Malformed.
    pub fn from_json(value: Json<'_>) -> GpuCount {
        Self::from_text_or_number(value.as_str(), value.as_number().as_ref())
    }

    /// [`GpuCount::from_json`] of a `serde_json::Value`.
    pub fn from_value(value: &serde_json::Value) -> GpuCount {
        Self::from_text_or_number(value.as_str(), value.as_number())
    }

    fn from_text_or_number(text: Option<&str>, number: Option<&serde_json::Number>) -> GpuCount {
        if let Some(text) = text {
            return GpuCount::parse(text);
        }
        let Some(n) = number else {
            return GpuCount::Invalid(QuantityError::Malformed);
        };
        if let Some(u) = n.as_u64() {
            GpuCount::Whole(u)
        } else if n.as_i64().is_some() {
            // as_u64 failed, so the integer is negative.
            GpuCount::Invalid(QuantityError::Negative)
        } else if let Some(f) = n.as_f64() {
            from_f64(f)
        } else {
            GpuCount::Invalid(QuantityError::Malformed)
        }
    }

    /// Parses the string form exactly: `"2000m"`, `"1e0"` and `"0.5k"` are
    /// whole, `"500m"` is Fractional, `"-0"` is zero; whitespace, unknown
    /// suffixes and strings longer than 256 bytes are Malformed.
    pub fn parse(s: &str) -> GpuCount {
        match parse_quantity(s) {
            Ok(n) => GpuCount::Whole(n),
            Err(e) => GpuCount::Invalid(e),
        }
    }

    /// The count when whole, else None.
    pub fn whole(self) -> Option<u64> {
        match self {
            GpuCount::Whole(n) => Some(n),
            GpuCount::Invalid(_) => None,
        }
    }

    /// Exactly zero ("0", "0m", "-0", 0): a zero limit is not a GPU request.
    pub fn is_zero(self) -> bool {
        matches!(self, GpuCount::Whole(0))
    }
}

/// Converts a JSON float exactly (no rounding) to a count.
fn from_f64(f: f64) -> GpuCount {
    /// 2^64: the smallest float strictly above `u64::MAX`.
    const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

    if !f.is_finite() {
        GpuCount::Invalid(QuantityError::Malformed)
    } else if f == 0.0 {
        GpuCount::Whole(0)
    } else if f < 0.0 {
        GpuCount::Invalid(QuantityError::Negative)
    } else if f.fract() != 0.0 {
        GpuCount::Invalid(QuantityError::Fractional)
    } else if f >= TWO_POW_64 {
        GpuCount::Invalid(QuantityError::TooLarge)
    } else {
        // Finite, integral and within 0..2^64: the conversion is exact.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        GpuCount::Whole(f as u64)
    }
}

/// A quantity split into its exact parts: value = ±`digits` × 10^`exp10` × 2^`exp2`.
struct Parsed<'a> {
    negative: bool,
    int_digits: &'a [u8],
    frac_digits: &'a [u8],
    exp10: i64,
    exp2: u32,
}

fn parse_quantity(s: &str) -> Result<u64, QuantityError> {
    // A plain count of up to 19 digits always fits a u64.
    if (1..=19).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().map_err(|_| QuantityError::Malformed);
    }
    let parsed = split(s).ok_or(QuantityError::Malformed)?;
    evaluate(&parsed)
}

/// Applies the grammar ([`quantity::split`]), and asks more of it: at most
/// 256 bytes, and at least one digit (upstream's scanner reads `+` or `Ki`
/// as zero).
fn split(s: &str) -> Option<Parsed<'_>> {
    if s.is_empty() || s.len() > MAX_QUANTITY_LEN {
        return None;
    }
    let parts = quantity::split(s).ok()?;
    if !parts.has_digits() {
        return None;
    }
    let (exp10, exp2) = match parts.suffix {
        Suffix::Decimal(exp10) => (exp10, 0),
        Suffix::Binary(exp2) => (0, exp2),
        Suffix::Exponent(signed) => (exponent(signed), 0),
    };
    Some(Parsed {
        negative: parts.negative,
        int_digits: parts.integer.as_bytes(),
        frac_digits: parts.fraction.unwrap_or_default().as_bytes(),
        exp10,
        exp2,
    })
}

/// The signed integer of an `e`/`E` suffix (`[+-]?[0-9]+`), saturated.
fn exponent(signed: &str) -> i64 {
    let (negative, digits) = match signed.as_bytes().split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, signed.as_bytes()),
    };
    // With at most 256 mantissa digits, an exponent of a few hundred
    // already decides the outcome: saturating is exact enough.
    let magnitude = digits.iter().fold(0i64, |acc, &d| {
        acc.saturating_mul(10).saturating_add(i64::from(d.wrapping_sub(b'0')))
    });
    if negative { magnitude.saturating_neg() } else { magnitude }
}

/// Evaluates ±digits × 10^exp10 × 2^exp2 exactly as a `u64`.
fn evaluate(p: &Parsed<'_>) -> Result<u64, QuantityError> {
    let mut digits: Vec<u8> =
        p.int_digits.iter().chain(p.frac_digits).map(|d| d.wrapping_sub(b'0')).collect();
    let frac_len = i64::try_from(p.frac_digits.len()).map_err(|_| QuantityError::Malformed)?;
    let mut exp10 = p.exp10.saturating_sub(frac_len);

    strip_leading_zeros(&mut digits);
    if digits.is_empty() {
        // Zero in any spelling ("-0", "0m", "0e999") is zero.
        return Ok(0);
    }
    if p.negative {
        return Err(QuantityError::Negative);
    }

    // Trailing zeros only move the decimal exponent; dropping them keeps
    // e.g. "1000…000e-42" exact.
    let trailing = digits.iter().rev().take_while(|&&d| d == 0).count();
    digits.truncate(digits.len().saturating_sub(trailing));
    exp10 = exp10.saturating_add(i64::try_from(trailing).map_err(|_| QuantityError::Malformed)?);

    // Remaining power of two to multiply by at the end.
    let shift: u32 = if exp10 >= 0 {
        // digits has a non-zero leading digit, so value >= 10^(len-1+exp10).
        let zeros = usize::try_from(exp10).map_err(|_| QuantityError::TooLarge)?;
        if digits.len().saturating_add(zeros) > U64_MAX_DIGITS {
            return Err(QuantityError::TooLarge);
        }
        digits.resize(digits.len().saturating_add(zeros), 0);
        p.exp2
    } else {
        // Divide by 10^k = 5^k * 2^k, exactly or not at all.
        let k = exp10.unsigned_abs();
        // The last digit is non-zero, so 10 does not divide the mantissa and
        // 5^k must divide it outright; that needs 5^k < 10^len, i.e.
        // k < 1.44 * len. Beyond that the value cannot be whole.
        let len = u64::try_from(digits.len()).map_err(|_| QuantityError::Malformed)?;
        if k > len.saturating_mul(2) {
            return Err(QuantityError::Fractional);
        }
        for _ in 0..k {
            if div_small(&mut digits, 5) != 0 {
                return Err(QuantityError::Fractional);
            }
        }
        let exp2 = u64::from(p.exp2);
        for _ in 0..k.saturating_sub(exp2) {
            if div_small(&mut digits, 2) != 0 {
                return Err(QuantityError::Fractional);
            }
        }
        u32::try_from(exp2.saturating_sub(k)).map_err(|_| QuantityError::TooLarge)?
    };

    strip_leading_zeros(&mut digits);
    if digits.len() > U64_MAX_DIGITS {
        return Err(QuantityError::TooLarge);
    }
    let mantissa = digits
        .iter()
        .try_fold(0u128, |acc, &d| acc.checked_mul(10)?.checked_add(u128::from(d)))
        .ok_or(QuantityError::TooLarge)?;
    let value = 2u128
        .checked_pow(shift)
        .and_then(|m| mantissa.checked_mul(m))
        .ok_or(QuantityError::TooLarge)?;
    u64::try_from(value).map_err(|_| QuantityError::TooLarge)
}

fn strip_leading_zeros(digits: &mut Vec<u8>) {
    let leading = digits.iter().take_while(|&&d| d == 0).count();
    digits.drain(..leading);
}

/// Divides a decimal digit string in place by a small divisor (2 or 5);
/// returns the remainder. Leading zeros may remain in the quotient.
fn div_small(digits: &mut [u8], divisor: u8) -> u8 {
    let mut rem: u8 = 0;
    for d in digits.iter_mut() {
        // cur <= 89, checked anyway to keep the lint mechanical.
        let cur = rem.saturating_mul(10).saturating_add(*d);
        *d = cur.checked_div(divisor).unwrap_or(0);
        rem = cur.checked_rem(divisor).unwrap_or(0);
    }
    rem
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests;
