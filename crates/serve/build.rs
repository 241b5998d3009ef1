//! Compiles proto/zkpipe/v1/prover.proto into the gRPC service and its messages.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = protox::compile(["zkpipe/v1/prover.proto"], ["proto"])?;
    tonic_prost_build::configure().compile_fds(files)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
