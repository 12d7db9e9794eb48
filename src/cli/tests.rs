use super::message;
use anyhow::Context;

#[derive(Debug, thiserror::Error)]
#[error("cannot read c.yaml: {0}")]
struct Saying(#[source] std::io::Error);

/// A cause is left out when the message already ends with it, and
/// kept when it only appears earlier in the message.
#[test]
fn each_cause_is_said_once() {
    let eof = || std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "EOF");
    let said = anyhow::Error::new(Saying(eof())).context("config");
    assert_eq!(message(&said), "config: cannot read c.yaml: EOF");
    let earlier =
        Err::<(), _>(eof()).context("EOF in the config").err().map(|error| message(&error));
    assert_eq!(earlier.as_deref(), Some("EOF in the config: EOF"));
}
