//! The text of a Kubernetes quantity (`k8s.io/apimachinery/pkg/api/resource`),
//! split into its parts, for every reader of quantities: [`super::Quantity`]
//! builds upstream's representation from them for the CEL library, and a
//! caller may evaluate them as it needs (a whole count, say) without the
//! arbitrary precision of [`super::Quantity`]. Depends on nothing.
//!
//! `<quantity> ::= <signedNumber><suffix>`, `<signedNumber> ::= [+-]<number>`,
//! `<number> ::= <digits> | <digits>.<digits> | <digits>. | .<digits>`,
//! `<suffix> ::= <binarySI> | <decimalSI> | e<signedInt> | E<signedInt>`.
//! As upstream's `parseQuantityString`, the number may have no digits at all
//! (`+`, `.`, `Ki`): whether that is a quantity is the caller's to decide.

/// Why a text is not a quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyntaxError {
    /// Not of the shape of upstream's regular expression
    /// `^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$` (empty included).
    Format,
    /// Of that shape, but the suffix is none of the known ones.
    Suffix,
}

/// A quantity's suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suffix<'a> {
    /// `n`, `u`, `m`, none, `k`, `M`, `G`, `T`, `P`, `E`: a power of ten.
    Decimal(i64),
    /// `Ki` … `Ei`: a power of two (10 to 60).
    Binary(u32),
    /// `e` or `E` and a signed integer, here its text (`[+-]?[0-9]+`, of
    /// any length: each caller bounds it its own way).
    Exponent(&'a str),
}

/// A quantity's text in parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts<'a> {
    /// Whether the number starts with `-`.
    pub negative: bool,
    /// The digits before the point, leading zeros included (maybe none).
    pub integer: &'a str,
    /// The digits after the point, when there is one.
    pub fraction: Option<&'a str>,
    /// The signed number as written, without the suffix.
    pub number: &'a str,
    /// The suffix after the number.
    pub suffix: Suffix<'a>,
}

impl Parts<'_> {
    /// Whether the number has at least one digit.
    pub fn has_digits(&self) -> bool {
        !self.integer.is_empty() || self.fraction.is_some_and(|f| !f.is_empty())
    }
}

/// Splits `text` into the parts of a quantity.
pub fn split(text: &str) -> Result<Parts<'_>, SyntaxError> {
    if text.is_empty() {
        return Err(SyntaxError::Format);
    }
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(unsigned) => (true, unsigned),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let integer = &unsigned[..leading_digits(unsigned)];
    let rest = &unsigned[integer.len()..];
    let (fraction, suffix) = match rest.strip_prefix('.') {
        Some(after) => {
            let digits = leading_digits(after);
            (Some(&after[..digits]), &after[digits..])
        }
        None => (None, rest),
    };
    let number = &text[..text.len().saturating_sub(suffix.len())];
    // The suffix's shape: letters of the suffixes, a sign, digits.
    let letters = suffix.bytes().take_while(|b| b"eEinumkKMGTP".contains(b)).count();
    let signed = &suffix[letters..];
    let digits = signed.strip_prefix(['+', '-']).unwrap_or(signed);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SyntaxError::Format);
    }
    Ok(Parts {
        negative,
        integer,
        fraction,
        number,
        suffix: interpret(suffix).ok_or(SyntaxError::Suffix)?,
    })
}

fn leading_digits(text: &str) -> usize {
    text.bytes().take_while(u8::is_ascii_digit).count()
}

fn interpret(suffix: &str) -> Option<Suffix<'_>> {
    let known = match suffix {
        "n" => Suffix::Decimal(-9),
        "u" => Suffix::Decimal(-6),
        "m" => Suffix::Decimal(-3),
        "" => Suffix::Decimal(0),
        "k" => Suffix::Decimal(3),
        "M" => Suffix::Decimal(6),
        "G" => Suffix::Decimal(9),
        "T" => Suffix::Decimal(12),
        "P" => Suffix::Decimal(15),
        "E" => Suffix::Decimal(18),
        "Ki" => Suffix::Binary(10),
        "Mi" => Suffix::Binary(20),
        "Gi" => Suffix::Binary(30),
        "Ti" => Suffix::Binary(40),
        "Pi" => Suffix::Binary(50),
        "Ei" => Suffix::Binary(60),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E'])?;
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Suffix::Exponent(exponent)
        }
    };
    Some(known)
}

#[cfg(test)]
mod tests;
