//! Plugin naming, launch environment and protocol defaults shared by the
//! runtime and plugin sides.

use std::time::Duration;

/// Where the runtime listens for external plugins by default.
pub const DEFAULT_SOCKET_PATH: &str = "/var/run/nri/nri.sock";
/// Environment variable telling a launched plugin its name.
pub const PLUGIN_NAME_ENV: &str = "NRI_PLUGIN_NAME";
/// Environment variable telling a launched plugin its index.
pub const PLUGIN_IDX_ENV: &str = "NRI_PLUGIN_IDX";
/// Environment variable giving a launched plugin its pre-connected socket fd.
pub const PLUGIN_SOCKET_ENV: &str = "NRI_PLUGIN_SOCKET";

/// Default time a plugin has to register after connecting.
pub const DEFAULT_REGISTRATION_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time a plugin has to answer a request.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// The first bytes of a WebAssembly binary module: magic and version 1.
const WASM_MAGIC: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];

/// Whether a file of the plugin directory is a WASM plugin module rather
/// than an executable: the runtime and what prepares its modules (the
/// `nri-wasm-compile` tool) tell them apart alike, by the first bytes.
pub fn is_wasm_module(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == WASM_MAGIC)
}

/// Why a plugin name or index is not acceptable. The texts are upstream's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginNameError {
    #[error("invalid plugin name {0:?}, idx-pluginname expected")]
    NoIndex(String),
    #[error("invalid plugin index {0:?}, must be 2 digits")]
    IndexLength(String),
    #[error("invalid plugin index {0:?} (not [0-9][0-9])")]
    IndexDigits(String),
    #[error("invalid plugin name: name is empty")]
    EmptyName,
    #[error("invalid plugin name {0:?}: contains invalid character {1:?}")]
    BadCharacter(String, char),
}

/// Splits `NN-name` at the first `-` into index and base name. Only the
/// index is validated, as upstream does.
pub fn parse_plugin_name(name: &str) -> Result<(&str, &str), PluginNameError> {
    let (idx, base) = name
        .split_once('-')
        .ok_or_else(|| PluginNameError::NoIndex(name.to_string()))?;
    check_plugin_index(idx)?;
    Ok((idx, base))
}

/// An index is exactly two ASCII digits.
pub fn check_plugin_index(idx: &str) -> Result<(), PluginNameError> {
    if idx.len() != 2 {
        return Err(PluginNameError::IndexLength(idx.to_string()));
    }
    if !idx.bytes().all(|b| b.is_ascii_digit()) {
        return Err(PluginNameError::IndexDigits(idx.to_string()));
    }
    Ok(())
}

/// A name is non-empty and uses only `[a-zA-Z0-9_.+-]`.
pub fn check_plugin_name(name: &str) -> Result<(), PluginNameError> {
    if name.is_empty() {
        return Err(PluginNameError::EmptyName);
    }
    match name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+')))
    {
        Some(c) => Err(PluginNameError::BadCharacter(name.to_string(), c)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wasm_modules_are_told_from_executables_by_their_first_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        assert!(is_wasm_module(&file(
            "10-module",
            b"\0asm\x01\0\0\0 and code"
        )));
        assert!(!is_wasm_module(&file("10-script", b"#!/bin/sh\n")));
        // Version 2 of the binary format, and a file cut short.
        assert!(!is_wasm_module(&file("10-later", b"\0asm\x02\0\0\0")));
        assert!(!is_wasm_module(&file("10-short", b"\0asm")));
        assert!(!is_wasm_module(&dir.path().join("10-missing")));
    }

    #[test]
    fn names_and_indices() {
        assert_eq!(parse_plugin_name("10-foo-bar"), Ok(("10", "foo-bar")));
        assert_eq!(
            parse_plugin_name("foo").unwrap_err().to_string(),
            "invalid plugin name \"foo\", idx-pluginname expected"
        );
        assert_eq!(
            parse_plugin_name("1-foo").unwrap_err().to_string(),
            "invalid plugin index \"1\", must be 2 digits"
        );
        assert_eq!(
            check_plugin_index("1a").unwrap_err().to_string(),
            "invalid plugin index \"1a\" (not [0-9][0-9])"
        );
        assert!(check_plugin_name("abcd-0123+EFGH_4567.ijkl").is_ok());
        assert_eq!(
            check_plugin_name("foo,bar").unwrap_err().to_string(),
            "invalid plugin name \"foo,bar\": contains invalid character ','"
        );
        assert_eq!(check_plugin_name(""), Err(PluginNameError::EmptyName));
    }
}
