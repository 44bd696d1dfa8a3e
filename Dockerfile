# syntax=docker/dockerfile:1
# The topoalign image: one binary, /usr/bin/topoalign, for the DRA driver (`topoalign
# driver`), the scheduler extender (`topoalign extender`) and the node agent (`topoalign
# agent`); the KubeVirt hook sidecar is the `kubevirt-sidecar` target (same binary, plus
# KubeVirt's sidecar-shim and a shell for the hook script).
#
#   docker build -t ghcr.io/topoalign/topoalign:0.1.0 .
#   docker build --target kubevirt-sidecar -t ghcr.io/topoalign/topoalign-kubevirt-sidecar:0.1.0 .
#
# Without a container daemon or a registry (CI, air-gapped hosts): scripts/build-image
# writes the same runtime (the binary on Debian 12's libc6, libgcc-s1 and ca-certificates,
# user 65532) as an OCI layout and a `docker load`-able tarball.
#
# Users: the image runs as nonroot 65532:65532. The extender keeps that user
# (runAsNonRoot in its chart). The driver and the node agent run as root through their
# securityContext (runAsUser: 0, every capability dropped, no privilege escalation): they
# create the kubelet plugin sockets and CDI specs in root-owned host directories and read
# the kubelet's pod-resources socket.
ARG KUBEVIRT_VERSION=v1.6.0

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p topoalign \
    && install -D -m 0755 target/release/topoalign /out/usr/bin/topoalign

FROM quay.io/kubevirt/sidecar-shim:${KUBEVIRT_VERSION} AS shim

# KubeVirt's sidecar-shim serves the hooks gRPC API to virt-launcher and runs
# /usr/bin/onDefineDomain --vmi JSON --domain XML (a shell script: debian-slim, not distroless).
FROM debian:bookworm-slim AS kubevirt-sidecar
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="topoalign-kubevirt-sidecar" \
      org.opencontainers.image.description="topoalign's KubeVirt onDefineDomain hook: passed-through GPUs and NICs on the guest NUMA cell and PCIe switch of their host" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=shim /sidecar-shim /sidecar-shim
COPY --from=build /out/usr/bin/topoalign /usr/bin/topoalign
COPY deploy/kubevirt/onDefineDomain /usr/bin/onDefineDomain
ENTRYPOINT ["/sidecar-shim"]

# The default target (last stage): the binary on distroless/cc (glibc, libgcc, CA certificates, no shell).
FROM gcr.io/distroless/cc-debian12 AS runtime
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="topoalign" \
      org.opencontainers.image.description="Topology-aware GPU + NIC placement for Kubernetes: DRA driver, scheduler extender, node agent and KubeVirt hook in one binary" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/usr/bin/topoalign /usr/bin/topoalign
USER 65532:65532
ENTRYPOINT ["/usr/bin/topoalign"]
