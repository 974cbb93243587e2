//! nri-rdt: sets a container's Intel RDT parameters (CLOS id, schemata,
//! monitoring) from pod annotations
//! `<field>.rdt.noderesource.dev/container.<name>`, as upstream's Go `rdt`
//! sample does.
//!
//! Flags: `-idx NN`, `-verbose`.

use std::collections::HashMap;

use log::{debug, error, info};
use nri_stub::api::{Container, ContainerAdjustment, ContainerUpdate, PodSandbox};
use nri_stub::{HandlerResult, Plugin};
use plugin_kit::flags::parse_go_bool;
use plugin_kit::{Flags, StubOptions};

/// The RDT adjustment for container `ctr` from pod `annotations`.
fn adjust_rdt(
    annotations: &HashMap<String, String>,
    ctr: &str,
) -> Result<ContainerAdjustment, String> {
    let suffix = format!(".rdt.noderesource.dev/container.{ctr}");
    let mut adjust = ContainerAdjustment::new();
    // Sorted, so that logs are stable; each field is set once, so the
    // order does not change the adjustment.
    let mut keys: Vec<_> = annotations.keys().collect();
    keys.sort();
    for key in keys {
        let Some(field) = key.strip_suffix(&suffix) else {
            continue;
        };
        let value = &annotations[key];
        match field {
            "closid" => {
                info!("Adjust closid={value}");
                adjust.set_linux_rdt_clos_id(value.clone());
            }
            "schemata" => {
                let schemata: Vec<&str> = value.split(',').collect();
                info!("Adjust schemata={schemata:?}");
                adjust.set_linux_rdt_schemata(schemata);
            }
            "enablemonitoring" => {
                let enable = parse_go_bool(value).ok_or_else(|| {
                    format!("strconv.ParseBool: parsing {value:?}: invalid syntax")
                })?;
                info!("Adjust enablemonitoring={enable}");
                adjust.set_linux_rdt_enable_monitoring(enable);
            }
            other => info!("Unknown rdt field field_name={other}"),
        }
    }
    Ok(adjust)
}

struct Rdt;

#[nri_stub::plugin]
impl Plugin for Rdt {
    async fn create_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<(ContainerAdjustment, Vec<ContainerUpdate>)> {
        debug!(
            "Create container namespace={} pod={} container={}",
            pod.namespace, pod.name, ctr.name
        );
        let adjust = adjust_rdt(&pod.annotations, &ctr.name)
            .inspect_err(|e| error!("pod={} container={}: {e}", pod.name, ctr.name))?;
        Ok((adjust, Vec::new()))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let flags = Flags::new("nri-rdt")
        .string("idx", "", "plugin index to register to NRI")
        .boolean("verbose", "enable verbose logging")
        .parse_env_or_exit();
    plugin_kit::logging::init(flags.flag("verbose"));
    info!("Starting plugin verbose={}", flags.flag("verbose"));
    plugin_kit::run_plugin(StubOptions::from_flags(&flags, "socket-path"), Rdt).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_stub::api::OptionalValue;

    use plugin_kit::annotations::from_pairs as ann;

    #[test]
    fn fields_for_the_named_container_only() {
        let a = ann(&[
            ("closid.rdt.noderesource.dev/container.c0", "gold"),
            (
                "schemata.rdt.noderesource.dev/container.c0",
                "L3:0=ff,MB:0=50",
            ),
            ("enablemonitoring.rdt.noderesource.dev/container.c0", "T"),
            ("closid.rdt.noderesource.dev/container.c1", "silver"),
            ("bogus.rdt.noderesource.dev/container.c0", "x"),
        ]);
        let adj = adjust_rdt(&a, "c0").unwrap();
        let rdt = &adj.linux.rdt;
        assert_eq!(rdt.clos_id.value().as_deref(), Some("gold"));
        assert_eq!(
            rdt.schemata.value(),
            Some(vec!["L3:0=ff".to_string(), "MB:0=50".to_string()])
        );
        assert_eq!(rdt.enable_monitoring.value(), Some(true));
        assert_eq!(adjust_rdt(&a, "c2").unwrap(), ContainerAdjustment::new());
    }

    #[test]
    fn bad_boolean_is_an_error() {
        let a = ann(&[("enablemonitoring.rdt.noderesource.dev/container.c0", "yes")]);
        assert_eq!(
            adjust_rdt(&a, "c0").unwrap_err(),
            "strconv.ParseBool: parsing \"yes\": invalid syntax"
        );
    }
}
