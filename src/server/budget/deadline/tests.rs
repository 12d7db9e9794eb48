use super::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const DEADLINE: Duration = Duration::from_millis(100);
/// Bounds each read, so a reader that is never cut fails the test
/// rather than hanging it.
const PATIENCE: Duration = Duration::from_secs(10);

async fn read(reader: &mut Deadlined<tokio::io::DuplexStream>) -> io::Result<usize> {
    let mut buf = [0u8; 16];
    tokio::time::timeout(PATIENCE, reader.read(&mut buf)).await.expect("the read ends")
}

#[tokio::test]
async fn a_request_that_stalls_is_cut_at_its_deadline() {
    let (mut client, server) = tokio::io::duplex(64);
    let phase = Arc::new(RequestPhase::default());
    let mut reader = Deadlined::new(server, Arc::clone(&phase), DEADLINE);
    let started = Instant::now();
    client.write_all(b"POST").await.expect("write");
    assert_eq!(read(&mut reader).await.expect("first bytes"), 4);
    let error = read(&mut reader).await.expect_err("cut");
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert!(started.elapsed() >= DEADLINE);
}

#[tokio::test]
async fn an_idle_or_arrived_connection_is_not_cut_and_the_next_request_starts_the_clock_again() {
    let (mut client, server) = tokio::io::duplex(64);
    let phase = Arc::new(RequestPhase::default());
    let mut reader = Deadlined::new(server, Arc::clone(&phase), DEADLINE);
    let mut buf = [0u8; 16];
    client.write_all(b"one").await.expect("write");
    assert_eq!(read(&mut reader).await.expect("read"), 3);
    phase.arrived();
    let waited = tokio::time::timeout(DEADLINE * 3, reader.read(&mut buf)).await;
    assert!(waited.is_err(), "a request being decided is not cut");
    phase.answered();
    tokio::time::sleep(DEADLINE * 3).await;
    client.write_all(b"two").await.expect("write");
    let started = Instant::now();
    assert_eq!(read(&mut reader).await.expect("idle is no fault"), 3);
    let error = read(&mut reader).await.expect_err("cut");
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert!(started.elapsed() >= DEADLINE, "counted from its first byte");
}
