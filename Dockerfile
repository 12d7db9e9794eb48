# syntax=docker/dockerfile:1
# Build stage: the same release build .ci/run performs.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY benches ./benches
RUN cargo build --release --locked --bin gpu-policy

# Runtime: distroless, no shell, CA roots included, non-root numeric UID.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/gpu-policy /gpu-policy
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["/gpu-policy"]
CMD ["serve"]
