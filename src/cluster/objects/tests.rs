use super::*;

#[test]
fn a_reason_is_one_line() {
    assert_eq!(one_line("cannot read: boom\n  at line 2\r\n"), "cannot read: boom at line 2");
}
