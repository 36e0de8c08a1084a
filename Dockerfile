# Multi-stage build of the operator image. libzmq comes from Debian (with libsodium, so
# CURVE works; see .cargo/config.toml).
#   docker build -t flux-operator:dev .
FROM docker.io/library/rust:1-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends pkg-config libzmq3-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY .cargo ./.cargo
COPY src ./src
COPY crds ./crds
RUN cargo build --release --locked --bin flux-operator

FROM docker.io/library/debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libzmq5 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/flux-operator /usr/local/bin/flux-operator
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/flux-operator"]
CMD ["run"]
