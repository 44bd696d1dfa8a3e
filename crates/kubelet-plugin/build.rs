//! Compiles the kubelet plugin .proto files with protox (pure Rust; no protoc needed).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/pluginregistration.proto",
        "proto/dra_v1.proto",
        "proto/dra_health_v1alpha1.proto",
        "proto/dra_health_v1beta1.proto",
        "proto/dra_health_v1.proto",
    ];
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    let fds = protox::compile(protos, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .build_transport(false)
        .compile_fds(fds)?;
    Ok(())
}
