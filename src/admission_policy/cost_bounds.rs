//! The sizes and limits Kubernetes applies to admission policies' CEL, and
//! [`Bounds`], a range of sizes or of costs with cel-go's arithmetic.

/// The largest request the API server accepts, which bounds every list,
/// map and string of a schema without `maxItems`, `maxProperties` or
/// `maxLength` (`MaxRequestSizeBytes`, `k8s.io/apiserver/pkg/apis/cel/config.go`).
pub const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;
/// The most one evaluation of one expression may cost before it is stopped
/// (`PerCallLimit`, `k8s.io/apiserver/pkg/apis/cel/config.go`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// What the validations and message expressions of one policy binding, or
/// one mutation, may cost together on one request (`RuntimeCELCostBudget`).
pub const RUNTIME_COST_BUDGET: u64 = 10_000_000;
/// What the match conditions of one binding may cost together
/// (`RuntimeCELCostBudgetMatchConditions`).
pub const MATCH_CONDITIONS_COST_BUDGET: u64 = 2_500_000;

/// The smallest JSON of a string, `""` (`k8s.io/apiserver/pkg/cel/limits.go`).
pub const MIN_STRING_SIZE: u64 = 2;

/// A range of sizes or of costs, with cel-go's arithmetic: saturating at
/// `u64::MAX`, fractional factors rounded up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub min: u64,
    pub max: u64,
}

impl Bounds {
    /// Nothing known: 0 to `u64::MAX` (cel-go's unknown size estimate).
    pub const UNKNOWN: Bounds = Bounds {
        min: 0,
        max: u64::MAX,
    };

    pub const fn fixed(value: u64) -> Bounds {
        Bounds {
            min: value,
            max: value,
        }
    }

    pub const fn up_to(max: u64) -> Bounds {
        Bounds { min: 0, max }
    }

    pub(super) fn add(self, other: Bounds) -> Bounds {
        Bounds {
            min: self.min.saturating_add(other.min),
            max: self.max.saturating_add(other.max),
        }
    }

    pub(super) fn multiply(self, other: Bounds) -> Bounds {
        Bounds {
            min: self.min.saturating_mul(other.min),
            max: self.max.saturating_mul(other.max),
        }
    }

    pub(super) fn union(self, other: Bounds) -> Bounds {
        Bounds {
            min: self.min.min(other.min),
            max: self.max.max(other.max),
        }
    }

    /// cel-go's `MultiplyByCostFactor`: each end times `factor`, rounded up.
    pub(super) fn times_factor(self, factor: f64) -> Bounds {
        Bounds {
            min: times_factor(self.min, factor),
            max: times_factor(self.max, factor),
        }
    }

    /// Whether the largest cost stays within `limit`.
    pub fn within(self, limit: u64) -> bool {
        self.max <= limit
    }
}

/// `multiplyByCostFactor` of cel-go `checker/cost.go`, in the same float
/// arithmetic so that the roundings agree.
#[allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]
fn times_factor(value: u64, factor: f64) -> u64 {
    let product = (value as f64 * factor).ceil();
    if product >= 18_446_744_073_709_551_616.0 {
        u64::MAX
    } else {
        product as u64
    }
}
