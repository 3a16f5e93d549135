//! Compiles `proto/genesis/v1/*.proto` with protox (pure Rust, no system
//! `protoc`), generates the prost messages and tonic clients/servers, and
//! writes the encoded `FileDescriptorSet` to `OUT_DIR` so the crate can export
//! it for reflection and for tests that enumerate every RPC.
//! It must never reach outside the repository's `proto/` directory.

use std::path::PathBuf;

use prost::Message as _;

const PROTO_ROOT: &str = "../../proto";
const FILES: [&str; 3] = [
    "genesis/v1/common.proto",
    "genesis/v1/agent_pod.proto",
    "genesis/v1/admin.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={PROTO_ROOT}");
    for file in FILES {
        println!("cargo:rerun-if-changed={PROTO_ROOT}/{file}");
    }

    let fds = protox::compile(FILES, [PROTO_ROOT])?;

    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out_dir.join("genesis_descriptor.bin"), fds.encode_to_vec())?;

    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
