//! Sections of the docs printed by the program: the text between two
//! marker comments must equal what the program prints now. With
//! `UPDATE_GOLDEN=1` the section is rewritten instead, as the golden files
//! are.

use std::path::Path;

/// Whether the run rewrites golden files and generated docs.
pub fn updating() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1")
}

/// The section of `file` (relative to the repository) between `begin` and
/// `end` is `printed`; `test` is the arguments of `cargo test` that run the
/// test (`--test it cli::output`), for the message that says how to update
/// it.
pub fn assert_section(file: &str, begin: &str, end: &str, printed: &str, test: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let docs = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{file}: {err}"));
    let Some(start) = docs.find(begin).map(|at| at + begin.len()) else {
        panic!("{file} has no marker {begin:?}");
    };
    let Some(end) = docs[start..].find(end).map(|at| start + at) else {
        panic!("{file} has no marker {end:?} after {begin:?}");
    };
    let expected = format!("\n{printed}\n");
    if updating() {
        let updated = format!("{}{expected}{}", &docs[..start], &docs[end..]);
        std::fs::write(&path, updated).unwrap_or_else(|err| panic!("{file}: {err}"));
        return;
    }
    assert!(
        docs[start..end] == expected,
        "{file} differs from what the program prints; run \
         `UPDATE_GOLDEN=1 cargo test {test}` and review `git diff {file}`\n\n{printed}"
    );
}
