use std::io::Write;
use std::thread;
use std::time::{Duration, Instant};

use super::BatchWriter;
use crate::telemetry::tests::RecordedOutput;

fn log(writer: &BatchWriter, line: &str) {
    writer.clone().write_all(line.as_bytes()).expect("never fails");
}

#[test]
fn lines_from_many_threads_arrive_whole_in_each_thread_s_order() {
    let output = RecordedOutput::default();
    let (writer, guard) = BatchWriter::new(output.clone());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let writer = writer.clone();
            thread::spawn(move || {
                for i in 0..1000 {
                    log(&writer, &format!("{{\"thread\":{t},\"line\":{i}}}\n"));
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a logging thread");
    }
    drop(guard);
    let text = output.text();
    let mut next = [0usize; 8];
    for line in text.lines() {
        let value: serde_json::Value = serde_json::from_str(line).expect("a whole line");
        let t = value["thread"].as_u64().expect("thread") as usize;
        assert_eq!(value["line"].as_u64(), Some(next[t] as u64), "{line}");
        next[t] += 1;
    }
    assert_eq!(next, [1000; 8]);
    // Batched: far fewer writes than lines.
    assert!(output.writes() < 8000 / 4, "{} writes", output.writes());
}

#[test]
fn a_line_is_written_without_waiting_for_more() {
    let output = RecordedOutput::default();
    let (writer, _guard) = BatchWriter::new(output.clone());
    log(&writer, "alone\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while output.text().is_empty() {
        assert!(Instant::now() < deadline, "the line was never written");
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(output.text(), "alone\n");
}

#[test]
fn a_full_buffer_is_written_by_the_thread_that_logs() {
    let output = RecordedOutput::default();
    let (writer, _guard) = BatchWriter::with_limit(output.clone(), 16);
    // Past the limit, the line is out before `write` returns.
    log(&writer, "0123456789abcdef-and-more\n");
    assert_eq!(output.text(), "0123456789abcdef-and-more\n");
}

#[test]
fn dropping_the_guard_writes_what_is_pending_and_later_lines_go_straight_out() {
    let output = RecordedOutput::default();
    let (writer, guard) = BatchWriter::new(output.clone());
    log(&writer, "before\n");
    drop(guard);
    assert_eq!(output.text(), "before\n");
    log(&writer, "after\n");
    assert_eq!(output.text(), "before\nafter\n");
}
