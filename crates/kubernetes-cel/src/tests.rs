//! The evaluator's tests: the engine as a whole, and Kubernetes' CEL
//! libraries function by function.

mod evaluator;
mod library;
