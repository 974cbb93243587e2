//! Where the logger writes: stderr, or a file chosen by flag or by the
//! runtime's configuration. (Objects are rendered by `plugin_kit::dump`:
//! YAML with the protobuf field names, as upstream's logger does.)

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::Mutex;

use log::{Level, LevelFilter, Log, Metadata, Record};

/// The process-wide log sink.
pub struct Output {
    file: Mutex<Option<File>>,
}

/// Installs the logger as the `log` backend and returns it.
pub fn install() -> &'static Output {
    let output: &'static Output = Box::leak(Box::new(Output {
        file: Mutex::new(None),
    }));
    log::set_logger(output).expect("logger installed once");
    log::set_max_level(LevelFilter::Info);
    output
}

impl Output {
    /// Sends all further output to `path` (appending, created if missing).
    pub fn to_file(&self, path: &str) -> std::io::Result<()> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        *self.file.lock().unwrap_or_else(|p| p.into_inner()) = Some(file);
        Ok(())
    }
}

impl Log for Output {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= Level::Info
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let line = format!("{:<5} {}\n", record.level(), record.args());
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let written = match file.as_mut() {
            Some(f) => f.write_all(line.as_bytes()),
            None => std::io::stderr().write_all(line.as_bytes()),
        };
        if written.is_err() {
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }

    fn flush(&self) {}
}
