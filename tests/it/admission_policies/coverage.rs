//! docs/policy.md's table of what the admission policies cover, rule by
//! rule, is `admission_policy::coverage::coverage_table`: printed from the
//! rule registry, each entry's generated policies and the reasons its
//! `ApiServer` gives.
//!
//! # Updating the docs
//!
//! After a change of the registry, rewrite the table between the markers
//! and review the diff:
//!
//! ```sh
//! UPDATE_GOLDEN=1 cargo test --test it admission_policies::coverage
//! git diff docs/policy.md
//! ```

use gpu_policy::admission_policy::coverage::coverage_table;
use gpu_policy::settings::Settings;

use crate::support::generated_docs::assert_section;

const BEGIN: &str =
    "<!-- coverage-table:begin: printed from the rule registry (src/policy/rules/mod.rs) -->\n";
const END: &str = "<!-- coverage-table:end -->\n";

#[test]
fn the_docs_coverage_table_is_the_registrys() {
    let table = coverage_table(&Settings::default());
    assert_section(
        "docs/policy.md",
        BEGIN,
        END,
        &table,
        "admission_policies::coverage",
    );
}
