//! `#[nri_stub::plugin]`: derives a plugin's event subscription from the
//! handlers it implements, as upstream's Go stub does with interface checks.
//!
//! Applied to `impl Plugin for T { ... }`, it adds
//! `fn implemented_events(&self) -> ::nri_stub::api::EventMask` whose bits are the
//! events of the handler methods present in the block. It only reads method
//! names, so it needs no parser crate.

use proc_macro::{Delimiter, Group, TokenStream, TokenTree};

/// Handler method name → NRI event number (wire value of `Event`).
const HANDLERS: [(&str, u32); 14] = [
    ("run_pod_sandbox", 1),
    ("stop_pod_sandbox", 2),
    ("remove_pod_sandbox", 3),
    ("create_container", 4),
    ("post_create_container", 5),
    ("start_container", 6),
    ("post_start_container", 7),
    ("update_container", 8),
    ("post_update_container", 9),
    ("stop_container", 10),
    ("remove_container", 11),
    ("update_pod_sandbox", 12),
    ("post_update_pod_sandbox", 13),
    ("validate_container_adjustment", 14),
];

/// Subscribes an NRI plugin to the events whose handlers its `impl
/// Plugin` block defines (use it as `#[nri_stub::plugin]`, re-exported by
/// nri-stub).
///
/// Put it on the `impl nri_stub::Plugin for T { ... }` block. It adds the
/// trait's one required method, `implemented_events`, returning the events
/// of the handler methods present in the block (`run_pod_sandbox` ->
/// RunPodSandbox, `create_container` -> CreateContainer, ...). The stub
/// subscribes the plugin to those events, unless the plugin's `configure`
/// or `StubBuilder::events` narrows the set. Deleting a handler thus
/// unsubscribes the plugin from its event. `configure`, `synchronize` and
/// `shutdown` are not events and do not count.
///
/// Its example is on nri-stub's re-export, `nri_stub::plugin`, where it is
/// compiled and run as a doc test (the stub cannot be this crate's
/// dependency: it depends on this crate).
///
/// It takes no arguments, and refuses a block that already defines
/// `implemented_events` or is not an `impl` block. It reads only method
/// names: a handler must be written in the block itself (not produced by
/// another macro) to count.
#[proc_macro_attribute]
pub fn plugin(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return compile_error("#[nri_stub::plugin] takes no arguments");
    }
    let mut tokens: Vec<TokenTree> = item.into_iter().collect();
    let body = match tokens.last() {
        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => g.clone(),
        _ => {
            return compile_error(
                "#[nri_stub::plugin] must be applied to an `impl Plugin for T { ... }` block",
            )
        }
    };
    if !tokens
        .iter()
        .any(|t| matches!(t, TokenTree::Ident(i) if i.to_string() == "impl"))
    {
        return compile_error(
            "#[nri_stub::plugin] must be applied to an `impl Plugin for T { ... }` block",
        );
    }

    let mut mask: u32 = 0;
    let mut previous_was_fn = false;
    for token in body.stream() {
        if let TokenTree::Ident(ident) = &token {
            let name = ident.to_string();
            if previous_was_fn {
                if name == "implemented_events" {
                    return compile_error(
                        "#[nri_stub::plugin] generates implemented_events(); remove the hand-written one",
                    );
                }
                if let Some((_, event)) = HANDLERS.iter().find(|(n, _)| *n == name) {
                    mask |= 1 << (event - 1);
                }
            }
            previous_was_fn = name == "fn";
        } else {
            previous_was_fn = false;
        }
    }

    let generated: TokenStream = format!(
        "fn implemented_events(&self) -> ::nri_stub::api::EventMask {{ ::nri_stub::api::EventMask::from_raw({mask:#x}) }}"
    )
    .parse()
    .expect("generated method parses");
    let mut stream = body.stream();
    stream.extend(generated);
    let mut new_body = Group::new(Delimiter::Brace, stream);
    new_body.set_span(body.span());
    let last = tokens.len() - 1;
    tokens[last] = TokenTree::Group(new_body);
    tokens.into_iter().collect()
}

fn compile_error(message: &str) -> TokenStream {
    format!("compile_error!({message:?});")
        .parse()
        .expect("compile_error! parses")
}

#[cfg(test)]
mod tests {
    use nri_api::ALL_EVENTS;
    use protobuf::Enum;

    use super::HANDLERS;

    /// `RunPodSandbox` -> `run_pod_sandbox`.
    fn snake_case(name: &str) -> String {
        let mut out = String::new();
        for c in name.chars() {
            if c.is_ascii_uppercase() && !out.is_empty() {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        }
        out
    }

    #[test]
    fn the_handler_table_is_the_apis_list_of_events() {
        assert_eq!(HANDLERS.len(), ALL_EVENTS.len());
        for ((name, number), event) in HANDLERS.iter().zip(ALL_EVENTS) {
            assert_eq!(*number, event.value() as u32, "{name}");
            assert_eq!(*name, snake_case(event.pretty_name()));
        }
    }
}
