//! The committed C header agrees with Cargo.toml about the version.

#[test]
fn header_version_macros_match_cargo() {
    let header = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/nri.h"))
        .expect("include/nri.h is committed");
    let define = |name: &str| {
        header
            .lines()
            .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("{name} missing from include/nri.h"))
            .trim()
            .trim_matches('"')
            .to_string()
    };
    assert_eq!(define("NRI_RS_VERSION"), env!("CARGO_PKG_VERSION"));
    assert_eq!(
        define("NRI_RS_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MAJOR")
    );
    assert_eq!(
        define("NRI_RS_VERSION_MINOR"),
        env!("CARGO_PKG_VERSION_MINOR")
    );
    assert_eq!(
        define("NRI_RS_VERSION_PATCH"),
        env!("CARGO_PKG_VERSION_PATCH")
    );
}
