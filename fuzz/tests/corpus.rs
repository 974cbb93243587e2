//! Every target's function over its committed corpus (`corpus/<target>/`),
//! without libFuzzer: a stable-Rust check that the inputs found so far,
//! crashers included once fixed, still pass. `make test` runs it.

use std::path::Path;

#[test]
fn every_target_passes_its_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut total = 0;
    // One test, inputs one at a time: the mux target measures allocations
    // process-wide.
    for (name, run) in nri_fuzz::TARGETS {
        let dir = root.join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{name}: no corpus");
        for f in &files {
            let data = std::fs::read(f).unwrap();
            eprintln!("{name}: {}", f.file_name().unwrap().to_string_lossy());
            run(&data);
        }
        total += files.len();
        println!("{name}: {} inputs", files.len());
    }
    println!("corpus: {total} inputs passed");
}
