//! A small stderr logger in the spirit of logrus' text format, which the
//! Go samples use: `time="…" level=info msg="…"`. `-verbose` turns on
//! debug messages, as in the Go samples.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use log::{Level, LevelFilter, Log, Metadata, Record};

/// How lines look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// logrus-like: `time="…" level=info msg="…"` (the Go samples).
    Logrus,
    /// `INFO  message` (nri-rs's logger, whose lines `make demo` reads).
    Plain,
}

struct Stderr(Format);

/// Where log lines go instead of stderr, once set.
static FILE: Mutex<Option<File>> = Mutex::new(None);

/// Sends all further log lines to `path` (appended, created if missing),
/// as the Go samples' `-log-file` does.
pub fn to_file(path: &str) -> std::io::Result<()> {
    let file = OpenOptions::new().create(true).append(true).open(path)?;
    *FILE.lock().unwrap_or_else(|p| p.into_inner()) = Some(file);
    Ok(())
}

impl Log for Stderr {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        // Only our plugin's messages below info; the stub's debug chatter
        // is not what -verbose asks for.
        if record.level() > Level::Info
            && (record.target().starts_with("nri_stub") || record.target().starts_with("nri_api"))
        {
            return;
        }
        let level = match record.level() {
            Level::Error => "error",
            Level::Warn => "warning",
            Level::Info => "info",
            Level::Debug => "debug",
            Level::Trace => "trace",
        };
        let line = match self.0 {
            Format::Logrus => format!(
                "time=\"{}\" level={level} msg={:?}\n",
                timestamp(),
                record.args().to_string()
            ),
            Format::Plain => format!("{:<5} {}\n", record.level(), record.args()),
        };
        let mut file = FILE.lock().unwrap_or_else(|p| p.into_inner());
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

/// UTC time in RFC 3339 with seconds.
fn timestamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Installs the logger: info and above, debug too when `verbose`.
pub fn init(verbose: bool) {
    init_with(Format::Logrus, verbose)
}

/// Installs the logger with the given line format.
pub fn init_with(format: Format, verbose: bool) {
    let logger: &'static Stderr = match format {
        Format::Logrus => &Stderr(Format::Logrus),
        Format::Plain => &Stderr(Format::Plain),
    };
    if log::set_logger(logger).is_ok() {
        log::set_max_level(if verbose {
            LevelFilter::Debug
        } else {
            LevelFilter::Info
        });
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamp_is_rfc3339() {
        let t = super::timestamp();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T', "{t}");
    }
}
