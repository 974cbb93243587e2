//! Differences between two versions of a pod or container, as log lines.
//!
//! Values are compared as their protobuf JSON form. A change is reported
//! per leaf, with the path named the way Go names the fields
//! (`Linux Resources Cpu Shares`, list indices and map keys as they are),
//! as upstream's differ (r3labs/diff on the Go structs) reports them.

use serde_json::Value;

/// Kind of a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Create,
    Update,
    Delete,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Create => "create",
            Kind::Update => "update",
            Kind::Delete => "delete",
        }
    }
}

/// One change: what, where, from what, to what.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub kind: Kind,
    pub path: Vec<String>,
    pub from: Option<Value>,
    pub to: Option<Value>,
}

/// `snake_case` protobuf field name to Go's `CamelCase` field name.
pub fn go_name(field: &str) -> String {
    field
        .split('_')
        .map(|part| {
            let mut c = part.chars();
            match c.next() {
                Some(first) => first.to_uppercase().chain(c).collect(),
                None => String::new(),
            }
        })
        .collect()
}

/// Leaf changes from `a` to `b`. `in_map` says the keys of the current
/// object are map keys (kept), not field names (renamed).
fn walk(
    path: &mut Vec<String>,
    a: Option<&Value>,
    b: Option<&Value>,
    out: &mut Vec<Change>,
    in_map: bool,
) {
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                path.push(if in_map { k.clone() } else { go_name(k) });
                let child_map = is_map_field(k);
                walk(path, x.get(k), y.get(k), out, child_map);
                path.pop();
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            for i in 0..x.len().max(y.len()) {
                path.push(i.to_string());
                walk(path, x.get(i), y.get(i), out, false);
                path.pop();
            }
        }
        (Some(x), Some(y)) if x == y => {}
        (Some(x @ (Value::Object(_) | Value::Array(_))), None) => leaves(
            path,
            x,
            &mut |p, v| out.push(change(Kind::Delete, p, Some(v), None)),
            in_map,
        ),
        (None, Some(y @ (Value::Object(_) | Value::Array(_)))) => leaves(
            path,
            y,
            &mut |p, v| out.push(change(Kind::Create, p, None, Some(v))),
            in_map,
        ),
        (Some(x), Some(y)) if x.is_object() || y.is_object() || x.is_array() || y.is_array() => {
            walk(path, Some(x), None, out, in_map);
            walk(path, None, Some(y), out, in_map);
        }
        (x, y) => {
            let kind = match (x, y) {
                (None, _) => Kind::Create,
                (_, None) => Kind::Delete,
                _ => Kind::Update,
            };
            out.push(change(kind, path, x.cloned(), y.cloned()));
        }
    }
}

fn change(kind: Kind, path: &[String], from: Option<Value>, to: Option<Value>) -> Change {
    Change {
        kind,
        path: path.to_vec(),
        from,
        to,
    }
}

fn leaves(path: &mut Vec<String>, v: &Value, f: &mut dyn FnMut(&[String], Value), in_map: bool) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                path.push(if in_map { k.clone() } else { go_name(k) });
                leaves(path, v, f, is_map_field(k));
                path.pop();
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                path.push(i.to_string());
                leaves(path, v, f, false);
                path.pop();
            }
        }
        other => f(path, other.clone()),
    }
}

/// Protobuf map fields of pods and containers: their keys are data.
fn is_map_field(name: &str) -> bool {
    matches!(
        name,
        "labels" | "annotations" | "unified" | "sysctl" | "net_devices"
    )
}

/// The leaf changes from `a` to `b` (protobuf JSON with field names).
pub fn diff(a: &Value, b: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk(&mut Vec::new(), Some(a), Some(b), &mut out, false);
    out
}

/// A value as Go's `%v` prints it: strings bare, absent as `<nil>`.
pub fn show(v: &Option<Value>) -> String {
    match v {
        None | Some(Value::Null) => "<nil>".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// Line diff of two texts (longest common subsequence): `- ` removed,
/// `+ ` added, `  ` kept lines; `None` when equal.
pub fn line_diff(a: &str, b: &str) -> Option<String> {
    if a == b {
        return None;
    }
    let (x, y): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut lcs = vec![vec![0usize; y.len() + 1]; x.len() + 1];
    for i in (0..x.len()).rev() {
        for j in (0..y.len()).rev() {
            lcs[i][j] = if x[i] == y[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < x.len() || j < y.len() {
        if i < x.len() && j < y.len() && x[i] == y[j] {
            out.push(format!("  {}", x[i]));
            i += 1;
            j += 1;
        } else if i < x.len() && (j == y.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(format!("- {}", x[i]));
            i += 1;
        } else {
            out.push(format!("+ {}", y[j]));
            j += 1;
        }
    }
    Some(out.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn leaf_changes_with_go_field_names() {
        let a = json!({"name": "c", "annotations": {"a_b": "1", "gone": "x"}, "env": ["A=1"],
                       "linux": {"resources": {"cpu": {"shares": {"value": "2"}}}}});
        let b = json!({"name": "c", "annotations": {"a_b": "2"}, "env": ["A=1", "B=2"],
                       "linux": {"resources": {"cpu": {"shares": {"value": "4"}, "cpus": "0-1"}}},
                       "mounts": [{"destination": "/x", "options": ["ro"]}]});
        let shown: Vec<String> = diff(&a, &b)
            .iter()
            .map(|c| {
                format!(
                    "{}: {:?}: From: {} -> To: {}",
                    c.kind.as_str(),
                    c.path,
                    show(&c.from),
                    show(&c.to)
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                r#"update: ["Annotations", "a_b"]: From: 1 -> To: 2"#,
                r#"delete: ["Annotations", "gone"]: From: x -> To: <nil>"#,
                r#"create: ["Env", "1"]: From: <nil> -> To: B=2"#,
                r#"create: ["Linux", "Resources", "Cpu", "Cpus"]: From: <nil> -> To: 0-1"#,
                r#"update: ["Linux", "Resources", "Cpu", "Shares", "Value"]: From: 2 -> To: 4"#,
                r#"create: ["Mounts", "0", "Destination"]: From: <nil> -> To: /x"#,
                r#"create: ["Mounts", "0", "Options", "0"]: From: <nil> -> To: ro"#,
            ]
        );
        assert!(diff(&a, &a).is_empty());
        assert_eq!(go_name("CDI_devices"), "CDIDevices");
        assert_eq!(go_name("pod_sandbox_id"), "PodSandboxId");
    }

    #[test]
    fn line_diffs() {
        assert_eq!(line_diff("a\nb\n", "a\nb\n"), None);
        assert_eq!(
            line_diff("a\nb\nc", "a\nx\nc").unwrap(),
            "  a\n- b\n+ x\n  c"
        );
    }
}
