//! Reading the committed seed corpora (`fuzz/corpus/<target>/`) for the
//! crates' `fuzz_corpus` tests, which include this file by `#[path]`. The
//! including crate lives in `services/<crate>`, so the corpus is two levels
//! up from its manifest. Test-only: must never be part of a fuzz target.

#![allow(dead_code)]

use std::path::PathBuf;

/// Every seed of one target, by file name; at least `min` of them, so a
/// missing corpus fails instead of passing vacuously.
pub fn corpus(target: &str, min: usize) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut seeds: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    seeds.sort();
    assert!(
        seeds.len() >= min,
        "{} has only {} seeds",
        dir.display(),
        seeds.len()
    );
    seeds
}

/// The bytes of the one seed whose file name ends with `suffix`.
pub fn seed<'a>(seeds: &'a [(String, Vec<u8>)], suffix: &str) -> &'a [u8] {
    &seeds.iter().find(|(n, _)| n.ends_with(suffix)).unwrap().1
}
