//! What the integration tests share.

use nri_wasm::METHODS;

/// A module whose `plugin_create_container` runs `body`.
pub fn module(body: &str) -> Vec<u8> {
    let others: String = METHODS
        .iter()
        .filter(|(_, e)| *e != "plugin_create_container")
        .map(|(_, e)| format!("(func (export \"{e}\") (param i32 i32) (result i64) (i64.const 0))"))
        .collect();
    wat::parse_str(format!(
        r#"(module
            (memory (export "memory") 1)
            (func (export "malloc") (param i32) (result i32) (i32.const 1024))
            (func (export "free") (param i32))
            (func (export "plugin_api_version") (result i64) (i64.const 1))
            (func (export "plugin_create_container") (param i32 i32) (result i64) {body})
            {others})"#
    ))
    .unwrap()
}
