//! Writes the seed corpus: `nri-fuzz-seeds [DIR]` (default `corpus`, as
//! run from fuzz/) gets one directory per target with `seed-NN` files.
//! Other files beside them (`found-*`, `grown-NN`) are left alone.

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let root = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "corpus".into()));
    for (target, seeds) in nri_fuzz::seeds::all() {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        for (i, seed) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i:02}")), seed)?;
        }
        println!("{target}: {} seeds", seeds.len());
    }
    Ok(())
}
