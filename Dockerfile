# syntax=docker/dockerfile:1
# Build stage: the same release build .ci/run performs, optimised with a
# profile of the server's own serving (scripts/release-build.sh: built
# instrumented, trained on the reviews of benches/reviews/ over loopback,
# built again with the profile). The load tool it trains with is one of the
# examples; rustup's llvm-tools merges the profile.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
COPY src ./src
COPY benches ./benches
COPY examples ./examples
COPY scripts ./scripts
RUN bash scripts/release-build.sh

# Runtime: distroless, no shell, CA roots included, non-root numeric UID.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/pgo/bin/gpu-policy /gpu-policy
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["/gpu-policy"]
CMD ["serve"]
