//! Kubernetes `resource.Quantity` as the CEL library sees it.
//!
//! Follows `k8s.io/apimachinery/pkg/api/resource/quantity.go` and `amount.go`
//! to the representation, not only to the value: upstream keeps a quantity
//! either as an `int64Amount` (value × 10^scale) or as an `inf.Dec`, and the
//! CEL functions expose that choice (`isInteger()` is false for any `inf.Dec`
//! quantity, and for `2000m`, which parses to value 2000 at scale -3).
//! The text is split by [`syntax::split`], which a reader of other values
//! (a count, say) can share.
//!
//! Reads: a quantity string. Allows: what `resource.ParseQuantity` allows,
//! with its rounding (up to 10^-9) and its cap (2^63-1 for binary suffixes).

pub mod syntax;

use num_bigint::{BigInt, Sign};
use num_traits::{ToPrimitive, Zero};
use std::cmp::Ordering;
use syntax::{Parts, Suffix, SyntaxError};

/// The regular expression upstream names in its format error.
const SPLIT_RE: &str = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

/// Decimal digits two operands may be apart before aligning them is refused:
/// upstream would write the difference out in digits (unbounded work).
const MAX_ALIGN_DIGITS: i64 = 4096;

/// Why a string is not a quantity, worded as upstream's errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// `ErrFormatWrong`.
    #[error("quantities must match the regular expression '{SPLIT_RE}'")]
    FormatWrong,
    /// `ErrNumeric`.
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// `ErrSuffix`.
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// Two operands whose exponents are too far apart to align.
    #[error("quantity exponents are too far apart to align")]
    TooFarApart,
}

/// A quantity's amount, in upstream's two forms.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Amount {
    /// `int64Amount`: `value × 10^scale`.
    Int { value: i64, scale: i64 },
    /// `inf.Dec`: `unscaled × 10^exponent` (exponent = -inf.Scale).
    Dec { unscaled: BigInt, exponent: i64 },
}

/// A parsed Kubernetes quantity (`kubernetes.Quantity` in CEL).
#[derive(Debug, Clone)]
pub struct Quantity {
    amount: Amount,
}

impl Quantity {
    /// `resource.ParseQuantity`.
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        if s == "0" {
            return Ok(Quantity::int(0, 0));
        }
        // `parseQuantityString`, on the shared reader of quantities.
        let parts = syntax::split(s).map_err(|error| match error {
            SyntaxError::Format => QuantityError::FormatWrong,
            SyntaxError::Suffix => QuantityError::Suffix,
        })?;
        let num = match parts.integer.trim_start_matches('0') {
            "" => "0",
            num => num,
        };
        let denom = parts.fraction.unwrap_or_default();
        // `suffixHandler.interpret`.
        let (binary, exponent) = match parts.suffix {
            Suffix::Decimal(e) => (false, e),
            Suffix::Binary(e) => (true, i64::from(e)),
            Suffix::Exponent(signed) => {
                // strconv.ParseInt(.., 10, 64) then int32(): a wrapping conversion.
                let parsed: i64 = signed.parse().map_err(|_| QuantityError::Suffix)?;
                (false, i64::from(parsed as i32))
            }
        };
        let len = |s: &str| i64::try_from(s.len()).unwrap_or(i64::MAX);
        let (precision, scale, mantissa) = match binary {
            // float32(exponent)*3/10 as upstream; exponents are 10..60.
            true if denom.is_empty() => (
                15i64.saturating_sub(len(num)).saturating_sub(exponent * 3 / 10).saturating_sub(1),
                0,
                1i64.checked_shl(exponent as u32).unwrap_or(0),
            ),
            true => (-1, 0, 1),
            false => (18i64.saturating_sub(len(num).saturating_add(len(denom))), exponent, 1),
        };
        let scale = scale.saturating_sub(len(denom));
        if precision >= 0 && scale >= -9 {
            let value: i64 = format!("{num}{denom}").parse().map_err(|_| QuantityError::Numeric)?;
            if let Some(result) = value.checked_mul(mantissa) {
                return Ok(Quantity::int(if parts.negative { -result } else { result }, scale));
            }
        }
        parse_dec(&parts, binary, exponent)
    }

    fn int(value: i64, scale: i64) -> Quantity {
        Quantity { amount: Amount::Int { value, scale } }
    }

    /// `NewQuantity(value, DecimalExponent)`, what `add(int)` and `sub(int)` add.
    pub fn from_int(value: i64) -> Quantity {
        Quantity::int(value, 0)
    }

    /// `Quantity.AsInt64`: the value as an int64 when the int64 form holds it
    /// at scale >= 0 without overflow.
    pub fn as_int64(&self) -> Option<i64> {
        match &self.amount {
            Amount::Int { value, scale } if *scale >= 0 => positive_scale(*value, *scale),
            Amount::Int { .. } | Amount::Dec { .. } => None,
        }
    }

    /// The exact value when it is a whole number, whatever the scale it was
    /// written at (`2000m` is 2): what the API server's canonical form of
    /// the quantity reads as.
    pub fn whole_value(&self) -> Option<BigInt> {
        let (unscaled, exponent) = self.as_dec();
        if exponent >= 0 {
            let power = BigInt::from(10u8).pow(u32::try_from(exponent).ok()?);
            return Some(unscaled * power);
        }
        let divisor = BigInt::from(10u8).pow(u32::try_from(-exponent).ok()?);
        let (quotient, remainder) = (&unscaled / &divisor, &unscaled % &divisor);
        remainder.is_zero().then_some(quotient)
    }

    /// `Quantity.Sign`.
    pub fn sign(&self) -> i64 {
        match &self.amount {
            Amount::Int { value, .. } => value.signum(),
            Amount::Dec { unscaled, .. } => sign_rank(unscaled.sign()),
        }
    }

    /// `Quantity.AsApproximateFloat64`: mantissa as float times `math.Pow10`.
    pub fn as_approximate_float(&self) -> f64 {
        let (base, exponent) = match &self.amount {
            Amount::Int { value, scale } => (*value as f64, *scale),
            Amount::Dec { unscaled, exponent } => {
                (unscaled.to_f64().unwrap_or(f64::NAN), *exponent)
            }
        };
        if exponent == 0 { base } else { base * go_pow10(exponent) }
    }

    /// `Quantity.Cmp`, exact; `None` only when the exponents are too far
    /// apart to align and the magnitudes do not already decide.
    pub fn compare(&self, other: &Quantity) -> Result<Ordering, QuantityError> {
        let (a, ea) = self.as_dec();
        let (b, eb) = other.as_dec();
        let (sa, sb) = (a.sign(), b.sign());
        if sa != sb {
            return Ok(sign_rank(sa).cmp(&sign_rank(sb)));
        }
        if sa == Sign::NoSign {
            return Ok(Ordering::Equal);
        }
        // Bounds on the decimal magnitude, as upstream's cmpDec.
        let bounds = |x: &BigInt, e: i64| {
            let n = i64::try_from(x.bits()).unwrap_or(i64::MAX);
            (n / 4 + e, n / 3 + 1 + e)
        };
        let (alo, ahi) = bounds(&a, ea);
        let (blo, bhi) = bounds(&b, eb);
        let magnitude = if alo > bhi {
            Some(Ordering::Greater)
        } else if ahi < blo {
            Some(Ordering::Less)
        } else {
            None
        };
        if let Some(m) = magnitude {
            return Ok(if sa == Sign::Minus { m.reverse() } else { m });
        }
        let (a, b, _) = align(a, ea, b, eb)?;
        Ok(a.cmp(&b))
    }

    /// `Quantity.Add`.
    pub fn add(&self, other: &Quantity) -> Result<Quantity, QuantityError> {
        self.plus(other, false)
    }

    /// `Quantity.Sub`.
    pub fn sub(&self, other: &Quantity) -> Result<Quantity, QuantityError> {
        self.plus(other, true)
    }

    /// `self + other`, or `self - other` when `negate`: in the int64 form
    /// when both are in it and the result fits, else in the decimal form.
    fn plus(&self, other: &Quantity, negate: bool) -> Result<Quantity, QuantityError> {
        if let (Amount::Int { value: a, scale: sa }, Amount::Int { value: b, scale: sb }) =
            (&self.amount, &other.amount)
            && let Some(b) = if negate { b.checked_neg() } else { Some(*b) }
            && let Some((value, scale)) = int_add(*a, *sa, b, *sb)
        {
            return Ok(Quantity::int(value, scale));
        }
        let (a, ea) = self.as_dec();
        let (b, eb) = other.as_dec();
        let (a, b, exponent) = align(a, ea, b, eb)?;
        let unscaled = if negate { a - b } else { a + b };
        Ok(Quantity { amount: Amount::Dec { unscaled, exponent } })
    }

    fn as_dec(&self) -> (BigInt, i64) {
        match &self.amount {
            Amount::Int { value, scale } => (BigInt::from(*value), *scale),
            Amount::Dec { unscaled, exponent } => (unscaled.clone(), *exponent),
        }
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Quantity) -> bool {
        self.compare(other) == Ok(Ordering::Equal)
    }
}

fn sign_rank(s: Sign) -> i64 {
    match s {
        Sign::Minus => -1,
        Sign::NoSign => 0,
        Sign::Plus => 1,
    }
}

/// `int64Amount.Add`: `None` where upstream falls back to `inf.Dec`.
fn int_add(a: i64, sa: i64, b: i64, sb: i64) -> Option<(i64, i64)> {
    if b == 0 {
        return Some((a, sa));
    }
    if a == 0 {
        return Some((b, sb));
    }
    match sa.cmp(&sb) {
        Ordering::Equal => a.checked_add(b).map(|v| (v, sa)),
        Ordering::Greater => positive_scale(a, sa - sb)?.checked_add(b).map(|v| (v, sb)),
        Ordering::Less => a.checked_add(positive_scale(b, sb - sa)?).map(|v| (v, sa)),
    }
}

/// `positiveScaleInt64`: `base × 10^scale` unless it overflows.
fn positive_scale(base: i64, scale: i64) -> Option<i64> {
    if base == 0 {
        return Some(0);
    }
    let scale = u32::try_from(scale).ok()?;
    10i64.checked_pow(scale).and_then(|p| base.checked_mul(p))
}

/// Both operands at the smaller exponent, and that exponent.
fn align(a: BigInt, ea: i64, b: BigInt, eb: i64) -> Result<(BigInt, BigInt, i64), QuantityError> {
    let shift = |x: BigInt, by: i64| -> Result<BigInt, QuantityError> {
        if by > MAX_ALIGN_DIGITS {
            return Err(QuantityError::TooFarApart);
        }
        let by = u32::try_from(by).map_err(|_| QuantityError::TooFarApart)?;
        Ok(x * BigInt::from(10u8).pow(by))
    };
    match ea.cmp(&eb) {
        Ordering::Equal => Ok((a, b, ea)),
        Ordering::Greater => Ok((shift(a, ea.saturating_sub(eb))?, b, eb)),
        Ordering::Less => Ok((a, shift(b, eb.saturating_sub(ea))?, ea)),
    }
}

/// The `inf.Dec` path of `ParseQuantity`.
fn parse_dec(parts: &Parts<'_>, binary: bool, exponent: i64) -> Result<Quantity, QuantityError> {
    if !parts.has_digits() {
        return Err(QuantityError::Numeric);
    }
    let (negative, frac_part) = (parts.negative, parts.fraction.unwrap_or_default());
    let all: String = [parts.integer, frac_part].concat();
    let mut unscaled: BigInt = all.parse().map_err(|_| QuantityError::Numeric)?;
    let frac_len = i64::try_from(frac_part.len()).map_err(|_| QuantityError::Numeric)?;
    let mut exp10 = -frac_len;
    if binary {
        unscaled <<= usize::try_from(exponent).map_err(|_| QuantityError::Suffix)?;
    } else {
        exp10 = exp10.saturating_add(exponent);
    }
    // Round non-zero magnitudes up to 10^-9, landing on exponent -9.
    if !unscaled.is_zero() {
        unscaled = round_up_to_nano(unscaled, exp10)?;
        exp10 = -9;
    }
    if binary {
        let max = BigInt::from(i64::MAX) * BigInt::from(1_000_000_000u32);
        if unscaled > max {
            return Ok(Quantity {
                amount: Amount::Dec {
                    unscaled: BigInt::from(if negative { -i64::MAX } else { i64::MAX }),
                    exponent: 0,
                },
            });
        }
    }
    if negative {
        unscaled = -unscaled;
    }
    Ok(Quantity { amount: Amount::Dec { unscaled, exponent: exp10 } })
}

/// A non-negative `unscaled × 10^exp10` as a count of 10^-9, rounded up.
fn round_up_to_nano(unscaled: BigInt, exp10: i64) -> Result<BigInt, QuantityError> {
    let up = exp10.saturating_add(9);
    if up >= 0 {
        if up > MAX_ALIGN_DIGITS * 4 {
            return Err(QuantityError::TooFarApart);
        }
        let by = u32::try_from(up).map_err(|_| QuantityError::TooFarApart)?;
        return Ok(unscaled * BigInt::from(10u8).pow(by));
    }
    let down = up.unsigned_abs();
    let digits = u64::try_from(unscaled.to_string().len()).unwrap_or(u64::MAX);
    if down > digits {
        return Ok(BigInt::from(1u8));
    }
    let divisor =
        BigInt::from(10u8).pow(u32::try_from(down).map_err(|_| QuantityError::TooFarApart)?);
    let quotient = &unscaled / &divisor;
    if (&quotient * &divisor) == unscaled { Ok(quotient) } else { Ok(quotient + 1u8) }
}

/// Go's `math.Pow10`: table products, not a correctly rounded power.
fn go_pow10(n: i64) -> f64 {
    let tab = |i: i64| -> f64 { format!("1e{i}").parse().unwrap_or(f64::NAN) };
    if (0..=308).contains(&n) {
        tab(n / 32 * 32) * tab(n % 32)
    } else if (-323..0).contains(&n) {
        let m = -n;
        tab(-(m / 32 * 32)) / tab(m % 32)
    } else if n > 0 {
        f64::INFINITY
    } else {
        0.0
    }
}
