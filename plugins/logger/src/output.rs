//! Where the logger writes: stderr, or a file chosen by flag or by the
//! runtime's configuration; and how it renders NRI objects (YAML, with the
//! protobuf field names, as upstream's logger does).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::Mutex;

use log::{info, Level, LevelFilter, Log, Metadata, Record};
use protobuf::MessageFull;
use serde_json::Value;

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

fn to_value<M: MessageFull>(msg: &M) -> Value {
    let options = protobuf_json_mapping::PrintOptions {
        proto_field_name: true,
        ..Default::default()
    };
    protobuf_json_mapping::print_to_string_with_options(msg, &options)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null)
}

pub fn one<M: MessageFull>(msg: &M) -> Value {
    to_value(msg)
}

pub fn many<M: MessageFull>(msgs: &[M]) -> Value {
    Value::Array(msgs.iter().map(to_value).collect())
}

pub fn optional<M: MessageFull>(msg: Option<&M>) -> Value {
    msg.map(to_value).unwrap_or(Value::Null)
}

/// Logs `value` as YAML, one log line per YAML line, under `prefix: tag:`.
pub fn dump(prefix: &str, tag: &str, value: Value) {
    let yaml = match serde_yaml::to_string(&value) {
        Ok(yaml) => yaml,
        Err(e) => {
            info!("{prefix}: {tag}: failed to dump object: {e}");
            return;
        }
    };
    info!("{prefix}: {tag}:");
    for line in yaml.trim().lines() {
        info!("{prefix}:    {line}");
    }
}
