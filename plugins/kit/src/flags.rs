//! Command-line flags parsed as Go's `flag` package parses them, so that a
//! DaemonSet written for an upstream Go sample starts ours unchanged:
//! `-name value`, `-name=value`, `--name value`; boolean flags take no
//! value (`-verbose`) unless written `-verbose=false`; parsing stops at
//! the first non-flag argument or after `--`.

use std::collections::BTreeMap;

#[derive(Clone, Debug)]
struct Spec {
    name: &'static str,
    boolean: bool,
    default: String,
    help: &'static str,
}

/// The flags a program accepts.
#[derive(Clone, Debug)]
pub struct Flags {
    program: String,
    specs: Vec<Spec>,
}

/// Parsed flag values.
#[derive(Clone, Debug, Default)]
pub struct Parsed {
    values: BTreeMap<&'static str, String>,
    set: Vec<&'static str>,
    /// The arguments after the flags.
    pub args: Vec<String>,
}

/// Why the command line was not accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlagError {
    /// `-h` or `-help`: the usage text (exit status 0 in Go).
    Help(String),
    /// A bad flag: message and usage (exit status 2 in Go).
    Bad(String),
}

impl Flags {
    pub fn new(program: impl Into<String>) -> Self {
        Flags {
            program: program.into(),
            specs: Vec::new(),
        }
    }

    /// A string flag.
    pub fn string(mut self, name: &'static str, default: &str, help: &'static str) -> Self {
        self.specs.push(Spec {
            name,
            boolean: false,
            default: default.to_string(),
            help,
        });
        self
    }

    /// A boolean flag, false unless given.
    pub fn boolean(mut self, name: &'static str, help: &'static str) -> Self {
        self.specs.push(Spec {
            name,
            boolean: true,
            default: "false".to_string(),
            help,
        });
        self
    }

    /// The usage text, as Go prints it.
    pub fn usage(&self) -> String {
        let mut out = format!("Usage of {}:\n", self.program);
        for s in &self.specs {
            if s.boolean {
                out += &format!("  -{}\n    \t{}\n", s.name, s.help);
            } else if s.default.is_empty() {
                out += &format!("  -{} string\n    \t{}\n", s.name, s.help);
            } else {
                out += &format!(
                    "  -{} string\n    \t{} (default {:?})\n",
                    s.name, s.help, s.default
                );
            }
        }
        out
    }

    pub fn parse(&self, args: impl IntoIterator<Item = String>) -> Result<Parsed, FlagError> {
        let mut parsed = Parsed {
            values: self
                .specs
                .iter()
                .map(|s| (s.name, s.default.clone()))
                .collect(),
            ..Default::default()
        };
        let mut args = args.into_iter().peekable();
        while let Some(arg) = args.peek().cloned() {
            if arg == "--" {
                args.next();
                break;
            }
            let stripped = arg
                .strip_prefix("--")
                .or_else(|| arg.strip_prefix('-'))
                .filter(|s| !s.is_empty() && !s.starts_with('-') && !s.starts_with('='));
            let Some(flag) = stripped else {
                if arg.starts_with('-') && arg != "-" {
                    return Err(FlagError::Bad(format!(
                        "bad flag syntax: {arg}\n{}",
                        self.usage()
                    )));
                }
                break;
            };
            args.next();
            let (name, inline) = match flag.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (flag, None),
            };
            let Some(spec) = self.specs.iter().find(|s| s.name == name) else {
                if name == "h" || name == "help" {
                    return Err(FlagError::Help(self.usage()));
                }
                return Err(FlagError::Bad(format!(
                    "flag provided but not defined: -{name}\n{}",
                    self.usage()
                )));
            };
            let value = if spec.boolean {
                match inline.as_deref() {
                    None => "true".to_string(),
                    Some(v) => match parse_go_bool(v) {
                        Some(b) => b.to_string(),
                        None => {
                            return Err(FlagError::Bad(format!(
                                "invalid boolean value {v:?} for -{name}: parse error\n{}",
                                self.usage()
                            )))
                        }
                    },
                }
            } else {
                match inline.or_else(|| args.next()) {
                    Some(v) => v,
                    None => {
                        return Err(FlagError::Bad(format!(
                            "flag needs an argument: -{name}\n{}",
                            self.usage()
                        )))
                    }
                }
            };
            parsed.values.insert(spec.name, value);
            parsed.set.push(spec.name);
        }
        parsed.args = args.collect();
        Ok(parsed)
    }

    /// Parses the process's arguments; prints usage and exits as Go does
    /// (status 0 for `-help`, 2 for a bad flag).
    pub fn parse_env_or_exit(&self) -> Parsed {
        match self.parse(std::env::args().skip(1)) {
            Ok(p) => p,
            Err(FlagError::Help(usage)) => {
                eprint!("{usage}");
                std::process::exit(0)
            }
            Err(FlagError::Bad(msg)) => {
                eprint!("{msg}");
                std::process::exit(2)
            }
        }
    }
}

/// Go's `strconv.ParseBool`.
pub fn parse_go_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

impl Parsed {
    /// A string flag's value (its default when not given).
    pub fn get(&self, name: &str) -> &str {
        self.values.get(name).map(String::as_str).unwrap_or("")
    }

    /// A string flag's value, `None` when empty.
    pub fn non_empty(&self, name: &str) -> Option<String> {
        Some(self.get(name).to_string()).filter(|s| !s.is_empty())
    }

    /// A boolean flag's value.
    pub fn flag(&self, name: &str) -> bool {
        self.get(name) == "true"
    }

    /// Whether the flag was given on the command line.
    pub fn is_set(&self, name: &str) -> bool {
        self.set.contains(&name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> Flags {
        Flags::new("test")
            .string("idx", "", "plugin index")
            .string("host-mount-file", "/host/proc/1/mountinfo", "mount file")
            .boolean("verbose", "verbose")
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn go_flag_syntax() {
        let p = flags()
            .parse(args(&["-idx", "10", "--verbose", "rest", "-idx", "20"]))
            .unwrap();
        assert_eq!(p.get("idx"), "10");
        assert!(p.flag("verbose"));
        assert_eq!(p.args, ["rest", "-idx", "20"]);
        assert_eq!(p.get("host-mount-file"), "/host/proc/1/mountinfo");
        assert!(!p.is_set("host-mount-file"));
        let p = flags().parse(args(&["--idx=5", "-verbose=false"])).unwrap();
        assert_eq!(p.non_empty("idx").as_deref(), Some("5"));
        assert!(!p.flag("verbose"));
        let p = flags().parse(args(&["--", "-idx"])).unwrap();
        assert_eq!(p.args, ["-idx"]);
    }

    #[test]
    fn bad_flags() {
        let bad = |a: &[&str]| match flags().parse(args(a)) {
            Err(FlagError::Bad(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(bad(&["-nope"]).starts_with("flag provided but not defined: -nope"));
        assert!(bad(&["-idx"]).starts_with("flag needs an argument: -idx"));
        assert!(bad(&["-verbose=maybe"]).starts_with("invalid boolean value"));
        assert!(bad(&["---idx"]).starts_with("bad flag syntax"));
        assert!(matches!(
            flags().parse(args(&["-h"])),
            Err(FlagError::Help(_))
        ));
    }
}
