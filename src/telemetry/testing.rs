//! The test helper of the logging room: an output that records what
//! reaches it.

use std::io;
use std::sync::{Arc, Mutex};

use tracing_subscriber::fmt::MakeWriter;

/// Records the bytes written to it, and in how many writes.
#[derive(Clone, Default)]
pub struct Recorded {
    bytes: Arc<Mutex<Vec<u8>>>,
    writes: Arc<Mutex<usize>>,
}

impl io::Write for Recorded {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.bytes.lock().expect("lock").extend_from_slice(bytes);
        *self.writes.lock().expect("lock") += 1;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Recorded {
    type Writer = Recorded;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Recorded {
    pub fn text(&self) -> String {
        String::from_utf8(self.bytes.lock().expect("lock").clone()).expect("UTF-8")
    }

    pub fn writes(&self) -> usize {
        *self.writes.lock().expect("lock")
    }
}
