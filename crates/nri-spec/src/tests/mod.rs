//! Tests of the spec generator, one file per field group. `upstream.rs`
//! holds the cases of upstream's generate test suite, rewritten here.

use oci_spec::runtime::Spec;
use serde_json::{json, Value};

use super::{Generator, SpecError};
use nri_api::ContainerAdjustment;

mod devices;
mod env;
mod json;
mod keyed;
mod linux;
mod mounts;
mod process;
mod resources;
mod upstream;

/// The spec upstream's tests start from: an empty process, and memory, CPU
/// and pids resources.
fn base_json() -> Value {
    json!({
        "ociVersion": "",
        "process": {"user": {"uid": 0, "gid": 0}, "cwd": ""},
        "linux": {
            "resources": {
                "memory": {"limit": 12345},
                "cpu": {
                    "shares": 45678,
                    "quota": 87654,
                    "period": 54321,
                    "cpus": "0-111",
                    "mems": "0-4"
                },
                "pids": {"limit": 1}
            }
        }
    })
}

fn spec_from(value: Value) -> Spec {
    serde_json::from_value(value).expect("test spec")
}

fn base_spec() -> Spec {
    spec_from(base_json())
}

fn to_json(spec: &Spec) -> Value {
    serde_json::to_value(spec).expect("spec serializes")
}

#[test]
fn generators_are_shareable_between_threads() {
    fn shareable<T: Send + Sync + Clone>() {}
    shareable::<Generator>();
}

/// A generator with no options and no host mount propagation check.
fn generator() -> Generator {
    Generator::builder().no_propagation_check().build()
}

/// `spec` adjusted by the plain generator, as JSON.
fn adjusted(spec: Value, adjust: &ContainerAdjustment) -> Value {
    adjusted_by(&generator(), spec, adjust)
}

fn adjusted_by(generator: &Generator, spec: Value, adjust: &ContainerAdjustment) -> Value {
    let mut spec = spec_from(spec);
    generator
        .adjust(&mut spec, adjust)
        .expect("adjustment applies");
    to_json(&spec)
}

/// Asserts that the adjustment is refused and the spec left untouched.
fn refused(generator: &Generator, spec: Value, adjust: &ContainerAdjustment) -> SpecError {
    let before = spec_from(spec);
    let mut spec = before.clone();
    let err = generator
        .adjust(&mut spec, adjust)
        .expect_err("adjustment is refused");
    assert_eq!(spec, before, "a refused adjustment left the spec changed");
    err
}
