//! The runtime's log, kept in memory while the e2e drives the runtime in process: a check that
//! fails can then say what the runtime decided (which shards the sharder saw, which Leases it
//! took over, which renewals failed), which its outcome alone cannot.

use std::{
    io,
    sync::{Arc, Mutex, MutexGuard},
};

use tracing_subscriber::{
    filter::LevelFilter,
    fmt::{MakeWriter, time::Uptime},
};

/// Every line logged at info or above since [`RuntimeLog::install`], with the checks' own
/// notes between them.
#[derive(Clone, Default)]
pub(crate) struct RuntimeLog(Arc<Mutex<Vec<u8>>>);

impl RuntimeLog {
    /// Installs a log as the process's subscriber; `None` when the process already has one.
    pub(crate) fn install() -> Option<Self> {
        let log = Self::default();
        tracing_subscriber::fmt()
            .with_writer(log.clone())
            .with_ansi(false)
            .with_timer(Uptime::default())
            .with_max_level(LevelFilter::INFO)
            .try_init()
            .ok()?;
        Some(log)
    }

    /// Where the log stands now, for [`RuntimeLog::since`].
    pub(crate) fn mark(&self) -> usize {
        self.lock().len()
    }

    /// Adds a line of the checks' own, to place the runtime's lines against what the checks
    /// did.
    pub(crate) fn note(&self, note: &str) {
        self.lock()
            .extend_from_slice(format!("---- {note}\n").as_bytes());
    }

    /// What was logged since `mark`.
    pub(crate) fn since(&self, mark: usize) -> String {
        let log = self.lock();
        String::from_utf8_lossy(log.get(mark..).unwrap_or_default()).into_owned()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<u8>> {
        // A line is appended whole; a panic while appending leaves nothing to repair.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl io::Write for RuntimeLog {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.lock().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for RuntimeLog {
    type Writer = Self;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}
