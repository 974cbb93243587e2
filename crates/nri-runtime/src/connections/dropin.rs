//! The runtime's own drop-in for a pre-installed plugin:
//! `<idx>-<name>.runtime.yaml` (else `<name>.runtime.yaml`) in the plugin
//! configuration directory, next to the plugin's `.conf`, which is the
//! plugin's and is handed to it unread. This one is read by the runtime and
//! never sent to the plugin. Its keys:
//!
//! * `requestTimeout`: the plugin's request timeout, a Go duration
//!   (`"5s"`, `"1m30s"`, `"250ms"`), instead of the adaptation's.
//! * `syncTimeout`: how long the plugin's Synchronize may take, a Go
//!   duration, as is, instead of the adaptation's sync timeout or the
//!   default that grows with the node's pods and containers.
//! * `concurrentRequests`: `true` if the plugin takes requests of
//!   different pods at once, when the runtime runs them at once
//!   ([`Options::pod_concurrency`](crate::Options::pod_concurrency)).
//!
//! Unknown keys and bad values are errors that name the file and the key:
//! a misspelled timeout must not quietly be the global one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::plugins::timeouts::PluginTimeouts;
use crate::Error;

/// What a runtime drop-in sets.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct RuntimeDropin {
    pub(crate) timeouts: PluginTimeouts,
    pub(crate) concurrent_requests: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Keys {
    request_timeout: Option<String>,
    sync_timeout: Option<String>,
    concurrent_requests: Option<bool>,
}

/// Reads the runtime drop-in of plugin `<idx>-<base>`, if there is one.
pub(crate) fn read(dir: &Path, idx: &str, base: &str) -> Result<RuntimeDropin, Error> {
    let Some((path, bytes)) = read_named(dir, idx, base, ".runtime.yaml", "runtime drop-in")?
    else {
        return Ok(RuntimeDropin::default());
    };
    let invalid =
        |e: String| Error::Start(format!("invalid runtime drop-in {}: {e}", path.display()));
    let text = std::str::from_utf8(&bytes).map_err(|_| invalid("not UTF-8".into()))?;
    parse(text).map_err(invalid)
}

fn parse(text: &str) -> Result<RuntimeDropin, String> {
    if text.trim().is_empty() {
        return Ok(RuntimeDropin::default());
    }
    let mut unknown = Vec::new();
    let keys: Keys = nri_yaml::from_str(text, |k| unknown.push(k)).map_err(|e| e.to_string())?;
    if let Some(key) = unknown.first() {
        return Err(format!("unknown key {key:?}"));
    }
    Ok(RuntimeDropin {
        timeouts: PluginTimeouts {
            request: timeout("requestTimeout", keys.request_timeout)?,
            sync: timeout("syncTimeout", keys.sync_timeout)?,
        },
        concurrent_requests: keys.concurrent_requests.unwrap_or(false),
    })
}

/// The timeout under `key`, if given: a Go duration of 1ms or more.
fn timeout(key: &str, value: Option<String>) -> Result<Option<Duration>, String> {
    let Some(v) = value else {
        return Ok(None);
    };
    parse_go_duration(&v)
        .and_then(|d| {
            if d < Duration::from_millis(1) {
                Err("below 1ms".to_string())
            } else {
                Ok(Some(d))
            }
        })
        .map_err(|e| format!("{key} {v:?}: {e}"))
}

/// A duration in Go's `time.ParseDuration` syntax, non-negative: decimal
/// numbers with a unit each (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), summed
/// (`1h2m3.5s`); `0` alone is zero.
pub(crate) fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let s = text.strip_prefix('+').unwrap_or(text);
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() || s.starts_with('-') {
        return Err("not a non-negative duration".into());
    }
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or("missing unit")?;
        let (number, tail) = rest.split_at(number_len);
        let value: f64 = number
            .parse()
            .map_err(|_| format!("bad number {number:?}"))?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let nanos_per = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err("missing unit".into()),
            other => return Err(format!("unknown unit {other:?}")),
        };
        total += value * nanos_per;
        rest = tail;
    }
    // Go's durations end at i64::MAX nanoseconds, as the wire's do.
    if !total.is_finite() || total > i64::MAX as f64 {
        return Err("out of range".into());
    }
    Ok(Duration::from_nanos(total.round() as u64))
}

/// The first of `<dir>/<idx>-<base><ext>` and `<dir>/<base><ext>` that
/// exists, with its contents; a file that exists but cannot be read is an
/// error naming it as `what`.
pub(crate) fn read_named(
    dir: &Path,
    idx: &str,
    base: &str,
    ext: &str,
    what: &str,
) -> Result<Option<(PathBuf, Vec<u8>)>, Error> {
    for file in [format!("{idx}-{base}{ext}"), format!("{base}{ext}")] {
        let path = dir.join(file);
        match std::fs::read(&path) {
            Ok(bytes) => return Ok(Some((path, bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(Error::Start(format!(
                    "failed to read {what} {}: {e}",
                    path.display()
                )))
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_go_parses_them() {
        let ms = Duration::from_millis;
        for (text, want) in [
            ("5s", ms(5000)),
            ("250ms", ms(250)),
            ("1m30s", ms(90_000)),
            ("1.5s", ms(1500)),
            ("1h", ms(3_600_000)),
            ("2us", Duration::from_micros(2)),
            ("2µs", Duration::from_micros(2)),
            ("7ns", Duration::from_nanos(7)),
            ("0", Duration::ZERO),
            ("+3s", ms(3000)),
        ] {
            assert_eq!(parse_go_duration(text), Ok(want), "{text}");
        }
        for bad in [
            "", "5", "s", "-1s", "5x", "1.2.3s", "5 s", "300y", "2562048h",
        ] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn a_drop_in_sets_the_request_timeout_and_refuses_what_it_does_not_know() {
        assert_eq!(
            parse("requestTimeout: 3s\n").unwrap().timeouts.request,
            Some(Duration::from_secs(3))
        );
        assert_eq!(parse("").unwrap(), RuntimeDropin::default());
        let typo = parse("requestTimout: 3s\n").unwrap_err();
        assert!(typo.contains("requestTimout"), "{typo}");
        let zero = parse("requestTimeout: 0s\n").unwrap_err();
        assert!(
            zero.contains("requestTimeout") && zero.contains("below 1ms"),
            "{zero}"
        );
        let unitless = parse("requestTimeout: 5\n").unwrap_err();
        assert!(unitless.contains("missing unit"), "{unitless}");
    }

    #[test]
    fn a_drop_in_sets_the_sync_timeout_as_it_sets_the_request_timeout() {
        let both = parse("requestTimeout: 3s\nsyncTimeout: 1m30s\n").unwrap();
        assert_eq!(
            both.timeouts,
            PluginTimeouts {
                request: Some(Duration::from_secs(3)),
                sync: Some(Duration::from_secs(90)),
            }
        );
        let alone = parse("syncTimeout: 250ms\n").unwrap().timeouts;
        assert_eq!(
            (alone.request, alone.sync),
            (None, Some(Duration::from_millis(250)))
        );
        for (text, why) in [
            ("syncTimeout: 0s\n", "below 1ms"),
            ("syncTimeout: 999us\n", "below 1ms"),
            ("syncTimeout: 5\n", "missing unit"),
            ("syncTimeout: -1s\n", "not a non-negative duration"),
            ("syncTimeout: 300y\n", "unknown unit"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(
                e.starts_with("syncTimeout ") && e.contains(why),
                "{text}: {e}"
            );
        }
        let typo = parse("syncTimout: 3s\n").unwrap_err();
        assert!(typo.contains("syncTimout"), "{typo}");
    }

    #[test]
    fn a_drop_in_says_whether_the_plugin_takes_concurrent_requests() {
        assert!(
            parse("concurrentRequests: true\n")
                .unwrap()
                .concurrent_requests
        );
        assert!(
            !parse("concurrentRequests: false\n")
                .unwrap()
                .concurrent_requests
        );
        assert!(!parse("requestTimeout: 3s\n").unwrap().concurrent_requests);
        let e = parse("concurrentRequests: sometimes\n").unwrap_err();
        assert!(e.contains("sometimes") || e.contains("bool"), "{e}");
    }

    #[test]
    fn the_file_is_named_in_every_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("10-slow.runtime.yaml"),
            "requestTimeout: soon\n",
        )
        .unwrap();
        let e = read(dir.path(), "10", "slow").unwrap_err().to_string();
        assert!(
            e.contains("10-slow.runtime.yaml") && e.contains("soon"),
            "{e}"
        );
        std::fs::write(dir.path().join("fast.runtime.yaml"), "requestTimeout: 2s\n").unwrap();
        let d = read(dir.path(), "20", "fast").unwrap();
        assert_eq!(
            d.timeouts.request,
            Some(Duration::from_secs(2)),
            "the name-only file"
        );
        assert_eq!(
            read(dir.path(), "30", "none").unwrap(),
            RuntimeDropin::default()
        );
    }
}
