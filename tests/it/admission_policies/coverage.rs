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

use std::path::Path;

use gpu_policy::admission_policy::coverage::coverage_table;
use gpu_policy::settings::Settings;

const BEGIN: &str =
    "<!-- coverage-table:begin: printed from the rule registry (src/policy/rules/mod.rs) -->\n";
const END: &str = "<!-- coverage-table:end -->\n";

fn update() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1")
}

#[test]
fn the_docs_coverage_table_is_the_registrys() {
    let table = coverage_table(&Settings::default());
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/policy.md");
    let docs = std::fs::read_to_string(&path).expect("docs/policy.md reads");
    let start = docs
        .find(BEGIN)
        .expect("docs/policy.md has the begin marker")
        + BEGIN.len();
    let end = start
        + docs[start..]
            .find(END)
            .expect("docs/policy.md has the end marker");
    let expected = format!("\n{table}\n");
    if update() {
        let updated = format!("{}{expected}{}", &docs[..start], &docs[end..]);
        std::fs::write(&path, updated).expect("docs/policy.md writes");
        return;
    }
    assert!(
        docs[start..end] == expected,
        "docs/policy.md's coverage table differs from the registry's; run \
         `UPDATE_GOLDEN=1 cargo test --test it admission_policies::coverage` and review \
         `git diff docs/policy.md`\n\n{table}"
    );
}
