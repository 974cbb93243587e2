//! OCI hook configuration files (`hooks.d`, see oci-hooks(5)) and which
//! hooks apply to a container — the rules of the hook manager upstream's
//! Go plugin uses (podman's `pkg/hooks`):
//!
//! * every `*.json` file in the directories, read in order; a file in a
//!   later directory replaces a same-named one from an earlier directory;
//! * versions `1.0.0` and `0.1.0` (also when no version is given);
//! * a hook whose file is malformed or invalid is left out; a hook whose
//!   `hook.path` does not exist is left out silently;
//! * hooks apply in the order of their file names, compared lower-cased;
//! * stage `prestart` becomes `createRuntime`.

use std::collections::{BTreeMap, HashMap};
use std::ffi::CString;
use std::path::{Path, PathBuf};

use nri_stub::api::optional::int;
use nri_stub::api::{Hook, Hooks};
use plugin_kit::goyaml;
use regex::Regex;
use serde::Deserialize;

pub const CURRENT_VERSION: &str = "1.0.0";
pub const OLD_VERSION: &str = "0.1.0";

/// `hook` of a 1.0.0 file: an OCI runtime-spec hook.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct OciHook {
    pub path: String,
    pub args: Vec<String>,
    pub env: Vec<String>,
    pub timeout: Option<i64>,
}

/// When a hook applies.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct When {
    pub always: Option<bool>,
    pub annotations: BTreeMap<String, String>,
    pub commands: Vec<String>,
    #[serde(rename = "hasBindMounts")]
    pub has_bind_mounts: Option<bool>,
    /// Any condition suffices (0.1.0 files), instead of all of them.
    #[serde(skip)]
    pub or: bool,
}

/// One hook configuration, as of version 1.0.0.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct HookConfig {
    pub version: String,
    pub hook: OciHook,
    pub when: When,
    /// `None` when the file has no `stages` (an error).
    pub stages: Option<Vec<String>>,
}

/// A version 0.1.0 file.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct OldHook {
    hook: Option<String>,
    arguments: Option<Vec<String>>,
    stages: Option<Vec<String>>,
    stage: Option<Vec<String>>,
    cmds: Option<Vec<String>>,
    cmd: Option<Vec<String>>,
    annotations: Option<Vec<String>>,
    annotation: Option<Vec<String>>,
    #[serde(rename = "hasbindmounts")]
    has_bind_mounts: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct VersionOnly {
    version: String,
}

/// Why a hook file was not taken.
#[derive(Debug, PartialEq)]
pub enum ReadError {
    /// Not a `.json` file: silently ignored.
    NotJson,
    /// `hook.path` does not exist: the hook is silently left out.
    MissingHookPath(String),
    Invalid(String),
}

fn either<T>(a: Option<T>, b: Option<T>, what: (&str, &str)) -> Result<Option<T>, String> {
    match (a, b) {
        (Some(_), Some(_)) => Err(format!("cannot set both '{}' and '{}'", what.0, what.1)),
        (a, b) => Ok(a.or(b)),
    }
}

fn read_old(content: &str) -> Result<HookConfig, String> {
    let raw: OldHook = goyaml::from_json_str(content)?;
    let path = raw.hook.ok_or("missing required property: hook")?;
    let stages = either(raw.stages, raw.stage, ("stage", "stages"))?
        .ok_or("missing required property: stages")?;
    let commands = either(raw.cmds, raw.cmd, ("cmd", "cmds"))?;
    let annotations = either(
        raw.annotations,
        raw.annotation,
        ("annotation", "annotations"),
    )?;
    Ok(HookConfig {
        version: CURRENT_VERSION.to_string(),
        hook: OciHook {
            args: raw
                .arguments
                .map(|a| std::iter::once(path.clone()).chain(a).collect())
                .unwrap_or_default(),
            path,
            ..Default::default()
        },
        when: When {
            commands: commands.unwrap_or_default(),
            has_bind_mounts: raw.has_bind_mounts,
            annotations: annotations
                .map(|a| BTreeMap::from([(".*".to_string(), a.join("|"))]))
                .unwrap_or_default(),
            or: true,
            ..Default::default()
        },
        stages: Some(stages),
    })
}

/// Parses a hook file's content, any supported version.
pub fn parse(content: &str) -> Result<HookConfig, String> {
    let ver: VersionOnly =
        goyaml::from_json_str(content).map_err(|e| format!("version check: {e}"))?;
    match ver.version.as_str() {
        CURRENT_VERSION => goyaml::from_json_str(content),
        OLD_VERSION | "" => read_old(content),
        other => return Err(format!("unrecognized hook version: {other:?}")),
    }
    .map_err(|e| format!("{}: {e}", ver.version))
}

fn exists(path: &str) -> bool {
    // faccessat(F_OK, AT_EACCESS), as upstream's check.
    CString::new(path).is_ok_and(|c| {
        // SAFETY: `c` is a NUL-terminated string that outlives the call.
        unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::F_OK, libc::AT_EACCESS) == 0 }
    })
}

impl HookConfig {
    /// Checks what upstream's manager checks before taking a hook.
    pub fn validate(&self) -> Result<(), ReadError> {
        let invalid = |s: String| Err(ReadError::Invalid(s));
        if self.version != CURRENT_VERSION {
            return invalid(format!(
                "unexpected hook version {:?} (expecting {CURRENT_VERSION})",
                self.version
            ));
        }
        if self.hook.path.is_empty() {
            return invalid("missing required property: hook.path".into());
        }
        if !exists(&self.hook.path) {
            return Err(ReadError::MissingHookPath(self.hook.path.clone()));
        }
        for (k, v) in &self.when.annotations {
            if let Err(e) = Regex::new(k) {
                return invalid(format!("invalid annotation key {k:?}: {e}"));
            }
            if let Err(e) = Regex::new(v) {
                return invalid(format!("invalid annotation value {v:?}: {e}"));
            }
        }
        for c in &self.when.commands {
            if let Err(e) = Regex::new(c) {
                return invalid(format!("invalid command {c:?}: {e}"));
            }
        }
        let Some(stages) = &self.stages else {
            return invalid("missing required property: stages".into());
        };
        for s in stages {
            if !STAGES.contains(&s.as_str()) {
                return invalid(format!("unknown stage {s:?}"));
            }
        }
        Ok(())
    }
}

const STAGES: &[&str] = &[
    "createContainer",
    "createRuntime",
    "prestart",
    "poststart",
    "poststop",
    "startContainer",
];

/// Reads one hook file.
pub fn read(path: &Path) -> Result<HookConfig, ReadError> {
    if path.extension().and_then(|e| e.to_str()) != Some("json") {
        return Err(ReadError::NotJson);
    }
    let content = match std::fs::read_to_string(path) {
        Ok(content) => content,
        // Gone since listed, or a dangling link: skipped, as upstream.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ReadError::NotJson),
        Err(e) => return Err(ReadError::Invalid(format!("{}: {e}", path.display()))),
    };
    let hook = parse(&content)
        .map_err(|e| ReadError::Invalid(format!("parsing hook {:?}: {e}", path.display())))?;
    hook.validate()?;
    Ok(hook)
}

/// What reading the hook directories gave.
#[derive(Debug, Default)]
pub struct ReadResult {
    /// The hooks taken, by file name.
    pub hooks: HashMap<String, HookConfig>,
    /// Every problem met, for the log.
    pub errors: Vec<String>,
    /// Whether upstream's manager would refuse to start: some directory
    /// could not be read, or its first bad file was not a hook whose path
    /// is missing (upstream ignores a directory's errors when the first
    /// one is "does not exist").
    pub fatal: bool,
}

/// Reads the hook files of `dirs` in order (a missing directory is fine).
pub fn read_dirs(dirs: &[PathBuf]) -> ReadResult {
    let mut out = ReadResult::default();
    for dir in dirs {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                out.errors.push(format!("{}: {e}", dir.display()));
                out.fatal = true;
                continue;
            }
        };
        let mut names: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut first_error: Option<bool> = None; // Some(is "not exist")
        for name in names {
            match read(&dir.join(&name)) {
                Ok(hook) => {
                    out.hooks.insert(name, hook);
                }
                Err(ReadError::NotJson) => {}
                Err(ReadError::MissingHookPath(p)) => {
                    first_error.get_or_insert(true);
                    out.errors
                        .push(format!("hook {name}: {p}: no such file or directory"));
                }
                Err(ReadError::Invalid(e)) => {
                    first_error.get_or_insert(false);
                    out.errors.push(e);
                }
            }
        }
        out.fatal |= first_error == Some(false);
    }
    out
}

fn is_match(pattern: &str, text: &str) -> bool {
    // Validated when read.
    Regex::new(pattern).is_ok_and(|re| re.is_match(text))
}

impl When {
    /// Whether the hook applies to a container with `args`, `annotations`
    /// and bind mounts (`has_bind_mounts`).
    pub fn matches(
        &self,
        args: &[String],
        annotations: &HashMap<String, String>,
        has_bind_mounts: bool,
    ) -> Result<bool, String> {
        let mut matches = 0;
        if let Some(always) = self.always {
            if always {
                if self.or {
                    return Ok(true);
                }
                matches += 1;
            } else if !self.or {
                return Ok(false);
            }
        }
        if let Some(want) = self.has_bind_mounts {
            if want && has_bind_mounts {
                if self.or {
                    return Ok(true);
                }
                matches += 1;
            } else if !self.or {
                return Ok(false);
            }
        }
        for (key_pattern, value_pattern) in &self.annotations {
            let matched = annotations
                .iter()
                .any(|(k, v)| is_match(key_pattern, k) && is_match(value_pattern, v));
            if matched {
                if self.or {
                    return Ok(true);
                }
                matches += 1;
            } else if !self.or {
                return Ok(false);
            }
        }
        if !self.commands.is_empty() {
            let command = args
                .first()
                .ok_or("process.args must have at least one entry")?;
            return Ok(self.commands.iter().any(|c| is_match(c, command)));
        }
        Ok(matches > 0)
    }
}

fn to_nri(h: &OciHook) -> Hook {
    Hook {
        path: h.path.clone(),
        args: h.args.clone(),
        env: h.env.clone(),
        timeout: h.timeout.map(int).unwrap_or_default(),
        ..Default::default()
    }
}

/// The hooks for a container, `None` when no hook applies.
pub fn hooks_for(
    hooks: &HashMap<String, HookConfig>,
    args: &[String],
    annotations: &HashMap<String, String>,
    has_bind_mounts: bool,
) -> Result<Option<Hooks>, String> {
    let mut named: Vec<_> = hooks.iter().collect();
    named.sort_by_key(|(name, _)| name.to_lowercase());
    let mut out: Option<Hooks> = None;
    for (name, hook) in named {
        let matched = hook
            .when
            .matches(args, annotations, has_bind_mounts)
            .map_err(|e| format!("matching hook {name:?}: {e}"))?;
        if !matched {
            log::debug!("hook {name} did not match");
            continue;
        }
        log::debug!("hook {name} matched; adding to stages {:?}", hook.stages);
        let into = out.get_or_insert_with(Hooks::default);
        for stage in hook.stages.iter().flatten() {
            let list = match stage.as_str() {
                "createContainer" => &mut into.create_container,
                "createRuntime" | "prestart" => &mut into.create_runtime,
                "poststart" => &mut into.poststart,
                "poststop" => &mut into.poststop,
                "startContainer" => &mut into.start_container,
                other => return Err(format!("hook {name:?}: unknown stage {other:?}")),
            };
            list.push(to_nri(&hook.hook));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALWAYS: &str = r#"{
        "version": "1.0.0",
        "hook": {"path": "/bin/sh", "args": ["sh", "-c", "true"], "env": ["A=1"], "timeout": 5},
        "when": {"always": true},
        "stages": ["prestart", "poststop"]
    }"#;

    use plugin_kit::annotations::from_pairs as ann;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_both_versions() {
        let h = parse(ALWAYS).unwrap();
        assert_eq!(h.hook.timeout, Some(5));
        assert_eq!(h.when.always, Some(true));
        assert!(h.validate().is_ok());
        let old = parse(r#"{"hook": "/bin/sh", "arguments": ["x"], "stage": ["prestart"], "cmd": ["^sh$"], "annotation": ["a", "b"]}"#).unwrap();
        assert_eq!(old.version, CURRENT_VERSION);
        assert_eq!(old.hook.args, ["/bin/sh", "x"]);
        assert!(old.when.or);
        assert_eq!(old.when.annotations[".*"], "a|b");
        assert!(old.validate().is_ok());
    }

    #[test]
    fn malformed_and_invalid_files() {
        for (content, want) in [
            ("{", "version check"),
            (
                r#"{"version": "2.0.0"}"#,
                "unrecognized hook version: \"2.0.0\"",
            ),
            (
                r#"{"version": "1.0.0", "hook": {"path": 3}}"#,
                "1.0.0: invalid type",
            ),
            (
                r#"{"stages": ["prestart"]}"#,
                "missing required property: hook",
            ),
            (
                r#"{"hook": "/bin/sh", "stage": ["a"], "stages": ["a"]}"#,
                "cannot set both",
            ),
            (
                r#"{"hook": "/bin/sh"}"#,
                "missing required property: stages",
            ),
        ] {
            let err = parse(content).unwrap_err();
            assert!(err.contains(want), "{content}: {err}");
        }
        let invalid = |content: &str| parse(content).unwrap().validate().unwrap_err();
        assert_eq!(
            invalid(r#"{"version": "1.0.0", "hook": {"path": "/bin/sh"}}"#),
            ReadError::Invalid("missing required property: stages".into())
        );
        assert!(matches!(
            invalid(r#"{"version": "1.0.0", "hook": {"path": "/bin/sh"}, "stages": ["bogus"]}"#),
            ReadError::Invalid(e) if e == "unknown stage \"bogus\""
        ));
        assert!(matches!(
            invalid(r#"{"version": "1.0.0", "hook": {"path": "/bin/sh"}, "when": {"commands": ["("]}, "stages": []}"#),
            ReadError::Invalid(e) if e.starts_with("invalid command \"(\"")
        ));
        assert_eq!(
            invalid(r#"{"version": "1.0.0", "hook": {"path": "/no/such/hook"}, "stages": []}"#),
            ReadError::MissingHookPath("/no/such/hook".into())
        );
    }

    #[test]
    fn when_rules() {
        let w = |json: &str| -> When { goyaml::from_json_str(json).unwrap() };
        let a = ann(&[("io.kubernetes.pod.name", "busybox-1")]);
        let sh = args(&["/bin/busybox", "sh"]);
        assert!(w(r#"{"always": true}"#).matches(&sh, &a, false).unwrap());
        assert!(!w(r#"{"always": false, "hasBindMounts": true}"#)
            .matches(&sh, &a, true)
            .unwrap());
        assert!(w(r#"{"hasBindMounts": true}"#)
            .matches(&sh, &a, true)
            .unwrap());
        assert!(!w(r#"{"hasBindMounts": true}"#)
            .matches(&sh, &a, false)
            .unwrap());
        assert!(w(r#"{"annotations": {"pod\\.name$": "^busybox"}}"#)
            .matches(&sh, &a, false)
            .unwrap());
        assert!(!w(r#"{"annotations": {"pod\\.name$": "^nginx"}}"#)
            .matches(&sh, &a, false)
            .unwrap());
        // Commands decide alone once checked.
        assert!(w(r#"{"always": true, "commands": ["busybox$"]}"#)
            .matches(&sh, &a, false)
            .unwrap());
        assert!(!w(r#"{"always": true, "commands": ["nginx"]}"#)
            .matches(&sh, &a, false)
            .unwrap());
        assert!(w(r#"{"commands": ["x"]}"#).matches(&[], &a, false).is_err());
        // Nothing to match: no.
        assert!(!w("{}").matches(&sh, &a, false).unwrap());
    }

    #[test]
    fn directories_order_override_and_stages() {
        let d1 = tempfile::tempdir().unwrap();
        let d2 = tempfile::tempdir().unwrap();
        std::fs::write(d1.path().join("B.json"), ALWAYS).unwrap();
        std::fs::write(
            d1.path().join("a.json"),
            ALWAYS.replace("\"poststop\"", "\"createContainer\""),
        )
        .unwrap();
        std::fs::write(d1.path().join("readme.txt"), "not a hook").unwrap();
        std::fs::write(d1.path().join("bad.json"), "{").unwrap();
        std::fs::write(
            d2.path().join("B.json"),
            ALWAYS.replace("-c", "-e").replace("\"prestart\", ", ""),
        )
        .unwrap();
        let read = read_dirs(&[d1.path().into(), d2.path().into(), "/no/such/dir".into()]);
        let hooks = read.hooks;
        assert_eq!(hooks.len(), 2);
        assert_eq!(read.errors.len(), 1, "{:?}", read.errors);
        assert!(read.errors[0].contains("bad.json"));
        assert!(read.fatal);
        // A hook with a missing path first makes the directory's errors
        // non-fatal, as upstream.
        std::fs::write(
            d1.path().join("0.json"),
            ALWAYS.replace("/bin/sh", "/no/such/hook"),
        )
        .unwrap();
        let read = read_dirs(&[d1.path().into()]);
        assert_eq!((read.errors.len(), read.fatal), (2, false));
        let h = hooks_for(&hooks, &args(&["x"]), &HashMap::new(), false)
            .unwrap()
            .unwrap();
        // a.json (prestart, createContainer) then B.json from d2 (poststop).
        assert_eq!(h.create_runtime.len(), 1);
        assert_eq!(h.create_container.len(), 1);
        assert_eq!(h.poststop.len(), 1);
        assert_eq!(h.poststop[0].args, ["sh", "-e", "true"]);
        assert_eq!(h.poststop[0].timeout.value, 5);
        assert!(h.prestart.is_empty());
        assert!(hooks_for(&HashMap::new(), &[], &HashMap::new(), false)
            .unwrap()
            .is_none());
    }
}
