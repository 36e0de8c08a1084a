# Multi-stage build of the operator image.
#   docker build -t flux-operator:dev .
FROM docker.io/library/rust:1-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake pkg-config libsodium-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY crds ./crds
RUN cargo build --release --locked --bin flux-operator

FROM docker.io/library/debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libsodium23 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/flux-operator /usr/local/bin/flux-operator
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/flux-operator"]
CMD ["run"]
