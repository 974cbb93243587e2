//! Generates the NRI protobuf messages and ttrpc service glue from
//! `proto/nri.proto` with the pure-Rust protobuf parser (no `protoc`).
//!
//! The generated files start with inner attributes (`#![allow(...)]`),
//! which `include!` rejects inside a module, so they are stripped here and
//! the equivalent `#[allow]`s sit on the including module instead.

use std::{env, fs, path::PathBuf};

const PROTO: &str = "proto/nri.proto";

fn main() {
    println!("cargo:rerun-if-changed={PROTO}");
    println!("cargo:rerun-if-changed=build.rs");

    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR is set by cargo"));
    ttrpc_codegen::Codegen::new()
        .out_dir(&out)
        .inputs([PROTO])
        .include("proto")
        .rust_protobuf()
        .customize(ttrpc_codegen::Customize {
            async_all: true,
            ..Default::default()
        })
        .rust_protobuf_customize(ttrpc_codegen::ProtobufCustomize::default().gen_mod_rs(false))
        .run()
        .expect("generating NRI protobuf code");

    // The file's descriptor on its own, for `wire`'s tables: read from
    // these bytes, they need none of rust-protobuf's reflection index,
    // which is built on first use and kept for the process's life.
    let set = protobuf_parse::Parser::new()
        .pure()
        .include("proto")
        .input(PROTO)
        .file_descriptor_set()
        .expect("parsing proto/nri.proto");
    let [file] = set.file.as_slice() else {
        panic!("proto/nri.proto imports nothing, so it is the only file");
    };
    let bytes = protobuf::Message::write_to_bytes(file).expect("encoding the descriptor");
    fs::write(out.join("nri.descriptor"), bytes).expect("writing the descriptor");

    for name in ["nri.rs", "nri_ttrpc.rs"] {
        let path = out.join(name);
        let text = fs::read_to_string(&path).expect("reading generated code");
        let stripped: String = text
            .lines()
            .filter(|line| {
                let line = line.trim_start();
                !line.starts_with("#![") && !line.starts_with("//!")
            })
            .collect::<Vec<_>>()
            .join("\n");
        fs::write(&path, stripped).expect("writing generated code");
    }
}
