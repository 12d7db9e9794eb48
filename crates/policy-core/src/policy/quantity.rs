//! Exact reading of Kubernetes resource quantities as GPU counts.
//!
//! `nvidia.com/gpu` is an integer extended resource, and `"1e0"`, `"2000m"`,
//! `"0.5k"` are all valid spellings of whole numbers: a policy that reads
//! counts with floats or a lenient parser can disagree with what the API
//! server accepted. So the grammar of `k8s.io/apimachinery/pkg/api/resource`
//! (split by [`kubernetes_cel::quantity::syntax`]) is evaluated exactly, in
//! arbitrary-precision integers (on at most 256 digits), and elsewhere
//! checked or saturating (the lint below).

#![deny(clippy::arithmetic_side_effects)]

use crate::document::Json;

use kubernetes_cel::quantity::syntax::{self as quantity, Suffix};
use num_bigint::BigUint;
use num_integer::Integer;

/// Longest string accepted as a quantity. Kubernetes rejects quantities far
/// shorter than this; the cap bounds the work done on hostile input.
const MAX_QUANTITY_LEN: usize = 256;

/// Decimal digits of `u64::MAX` (18446744073709551615): a whole value of
/// more digits cannot be a valid count.
const U64_MAX_DIGITS: u32 = 20;

/// Decimal digits of the largest mantissa: 256 digits times 2^60 (19 digits).
const MAX_MANTISSA_DIGITS: u32 = 275;

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

fn parse_quantity(s: &str) -> Result<u64, QuantityError> {
    // A plain count of up to 19 digits always fits a u64.
    if (1..=19).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().map_err(|_| QuantityError::Malformed);
    }
    exact(s)
}

/// Applies the grammar ([`quantity::split`]), and asks more of it: at most
/// 256 bytes, and at least one digit (upstream's scanner reads `+` or `Ki`
/// as zero); then evaluates ±digits × 10^exp10 × 2^exp2 exactly as a `u64`.
fn exact(s: &str) -> Result<u64, QuantityError> {
    let parts = Some(s)
        .filter(|s| s.len() <= MAX_QUANTITY_LEN)
        .and_then(|s| quantity::split(s).ok())
        .filter(quantity::Parts::has_digits)
        .ok_or(QuantityError::Malformed)?;
    let fraction = parts.fraction.unwrap_or_default();
    let (exp10, exp2) = match parts.suffix {
        Suffix::Decimal(exp10) => (exp10, 0),
        Suffix::Binary(exp2) => (0, exp2),
        // `[+-]?[0-9]+`, saturated: with at most 256 mantissa digits, an
        // exponent of a few hundred already decides the outcome.
        Suffix::Exponent(signed) => {
            (signed.parse().unwrap_or(if signed.starts_with('-') { i64::MIN } else { i64::MAX }), 0)
        }
    };
    let exp10 = exp10.saturating_sub(i64::try_from(fraction.len()).unwrap_or(i64::MAX));
    let digits = [parts.integer, fraction].concat();
    let digits = BigUint::parse_bytes(digits.as_bytes(), 10).ok_or(QuantityError::Malformed)?;
    if digits == BigUint::ZERO {
        // Zero in any spelling ("-0", "0m", "0e999") is zero.
        return Ok(0);
    }
    if parts.negative {
        return Err(QuantityError::Negative);
    }
    scaled(digits, exp10, exp2)
}

/// `digits × 10^exp10 × 2^exp2` as a `u64`, exactly.
// Only `BigUint` products, which cannot overflow.
#[allow(clippy::arithmetic_side_effects)]
fn scaled(digits: BigUint, exp10: i64, exp2: u32) -> Result<u64, QuantityError> {
    let mantissa = digits * BigUint::from(2u8).pow(exp2);
    let value = if exp10 >= 0 {
        // Any non-zero mantissa times more than 10^20 is beyond u64::MAX.
        let k = u32::try_from(exp10).ok().filter(|k| *k <= U64_MAX_DIGITS);
        mantissa * BigUint::from(10u8).pow(k.ok_or(QuantityError::TooLarge)?)
    } else {
        // The mantissa is below 10^256 × 2^60 < 10^275: a larger divisor
        // leaves a fraction.
        let k = u32::try_from(exp10.unsigned_abs()).ok().filter(|k| *k < MAX_MANTISSA_DIGITS);
        let divisor = BigUint::from(10u8).pow(k.ok_or(QuantityError::Fractional)?);
        let (quotient, remainder) = mantissa.div_rem(&divisor);
        if remainder != BigUint::ZERO {
            return Err(QuantityError::Fractional);
        }
        quotient
    };
    u64::try_from(&value).map_err(|_| QuantityError::TooLarge)
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests;
