//! Content digests (`sha256:<hex>`, `sha512:<hex>`): what a manifest or a
//! config blob must hash to. A digest read from a registry's answer goes
//! into the next URL, so it is accepted only in its exact form.

use std::fmt;

use sha2::{Digest as _, Sha256, Sha512};

use super::lookup::Failure;

/// The algorithms of the OCI image spec's registered digests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Algorithm {
    Sha256,
    Sha512,
}

/// A digest in its canonical form: a known algorithm and its lower-case
/// hex of the right length.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Digest {
    algorithm: Algorithm,
    text: String,
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn lower_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

impl Digest {
    /// Reads `sha256:` and 64 hex digits, or `sha512:` and 128; nothing
    /// else (no other algorithm, no upper case, no other characters).
    pub(super) fn parse(text: &str) -> Result<Self, Failure> {
        let invalid = || {
            let shown: String = text.chars().take(80).collect();
            Failure::failed(format!("{shown:?} is not a sha256 or sha512 digest in lower-case hex"))
        };
        let (algorithm, hex) = text.split_once(':').ok_or_else(invalid)?;
        let (algorithm, length) = match algorithm {
            "sha256" => (Algorithm::Sha256, 64),
            "sha512" => (Algorithm::Sha512, 128),
            _ => return Err(invalid()),
        };
        let canonical = hex.len() == length
            && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !canonical {
            return Err(invalid());
        }
        Ok(Self { algorithm, text: text.to_owned() })
    }

    fn of(algorithm: Algorithm, bytes: &[u8]) -> Self {
        let text = match algorithm {
            Algorithm::Sha256 => format!("sha256:{}", lower_hex(&Sha256::digest(bytes))),
            Algorithm::Sha512 => format!("sha512:{}", lower_hex(&Sha512::digest(bytes))),
        };
        Self { algorithm, text }
    }

    pub(super) fn sha256_of(bytes: &[u8]) -> Self {
        Self::of(Algorithm::Sha256, bytes)
    }

    /// The failure names `what`.
    pub(super) fn verify(&self, what: &str, bytes: &[u8]) -> Result<(), Failure> {
        let actual = Self::of(self.algorithm, bytes);
        if actual.text == self.text {
            Ok(())
        } else {
            Err(Failure::failed(format!(
                "{what} does not match its digest {} (it hashes to {})",
                self.text, actual.text
            )))
        }
    }

    pub(super) fn as_str(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests;
