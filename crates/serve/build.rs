//! Compiles proto/zkpipe/v1/prover.proto into the gRPC service and its messages, and keeps its
//! encoded descriptors for server reflection.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = protox::compile(["zkpipe/v1/prover.proto"], ["proto"])?;
    // The descriptors, for server reflection.
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("zkpipe_v1_descriptor.bin"),
        prost::Message::encode_to_vec(&files),
    )?;
    // A witness's values as `bytes::Bytes`: decoded from the received buffer without a copy,
    // and cloned by a client without one.
    tonic_prost_build::configure()
        .bytes(".zkpipe.v1.CircuitWitness")
        .compile_fds(files)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
