//! Rebuild the crate when a migration is added or changed: `sqlx::migrate!`
//! embeds `migrations/` at compile time, and cargo does not otherwise watch
//! a folder outside the crate, so a new migration would be missed by an
//! incremental build.

fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
