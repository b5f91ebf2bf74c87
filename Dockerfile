# syntax=docker/dockerfile:1
# cipherd container image: a static binary on a distroless, non-root base.
#
#   docker build --build-arg VERSION=v1.2.3 --build-arg REVISION=$(git rev-parse HEAD) -t cipherd .
#   docker run --rm -p 8080:8080 -e CIPHERD_ADMIN_TOKEN=… --read-only cipherd
#   docker run --rm cipherd speed -seconds 1        # benchmark the host it runs on
#
# The image runs as UID 65532 (distroless "nonroot", numeric so that
# Kubernetes can verify runAsNonRoot) and writes only to /data: the speed
# profile cache, and the file keystore and the hashed admin token when no
# keyring and no CIPHERD_ADMIN_TOKEN are given. Everything else may be
# read-only (docker run --read-only, Kubernetes readOnlyRootFilesystem).
# Configuration is by CIPHERD_* variables (docs/OPERATIONS.md) or a file
# named by CIPHERD_CONFIG. cmd/cipherd/container_test.go checks this file.
#
# The default image is static (CGO_ENABLED=0) and cannot load a PKCS#11
# module. The pkcs11 target builds with cgo on Debian and can:
#
#   docker build --target pkcs11 -t cipherd:pkcs11 .
#   docker build --target pkcs11 --build-arg PKCS11_PACKAGES=softhsm2 -t cipherd:softhsm .
#
# Mount or install the token's module, and name it in CIPHERD_ROOT_KEY_URI
# (module-path=…); docs/OPERATIONS.md, Root of trust.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download && go mod verify
COPY . .
ARG VERSION=devel
ARG TARGETOS
ARG TARGETARCH
# CGO_ENABLED=0: a static binary, nothing needed from the runtime image but
# the CA certificates. -trimpath and no VCS stamp: reproducible from the tree.
# GOTOOLCHAIN=auto: build with at least the toolchain go.mod names (its
# standard library carries security fixes the 1.26 image may predate).
RUN GOTOOLCHAIN=auto CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/cipherd/cipherd/internal/buildinfo.Version=${VERSION}" \
      -o /out/cipherd ./cmd/cipherd
# The data directory, created here because the runtime image has no shell.
RUN mkdir -p /out/data

# The PKCS#11 build: cgo, so the provider can dlopen the token's module.
# It builds for the platform it runs on, since cgo needs a C compiler for
# the target.
FROM golang:${GO_VERSION}-bookworm AS build-pkcs11
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download && go mod verify
COPY . .
ARG VERSION=devel
RUN GOTOOLCHAIN=auto CGO_ENABLED=1 \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/cipherd/cipherd/internal/buildinfo.Version=${VERSION}" \
      -o /out/cipherd ./cmd/cipherd
RUN mkdir -p /out/data

# The PKCS#11 image: Debian, whose glibc the module and cipherd link to.
# PKCS11_PACKAGES adds Debian packages, such as softhsm2 to try it out or
# opensc for smart cards; a vendor's module is usually mounted instead.
FROM debian:bookworm-slim AS pkcs11
ARG VERSION=devel
ARG REVISION=unknown
ARG PKCS11_PACKAGES=""
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates ${PKCS11_PACKAGES} \
 && rm -rf /var/lib/apt/lists/*
LABEL org.opencontainers.image.title="cipherd-pkcs11" \
      org.opencontainers.image.description="HTTP crypto-offload service, with the root key in a PKCS#11 token" \
      org.opencontainers.image.source="https://github.com/cipherd/cipherd" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="debian:bookworm-slim"
COPY --from=build-pkcs11 /out/cipherd /usr/local/bin/cipherd
COPY --from=build-pkcs11 --chown=65532:65532 --chmod=0700 /out/data /data
ENV CIPHERD_ADDR=:8080 \
    CIPHERD_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 8080
USER 65532:65532
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["/usr/local/bin/cipherd", "health", "-q", "-timeout", "3s"]
ENTRYPOINT ["/usr/local/bin/cipherd"]
CMD ["serve"]

# The default image (the last stage): static, distroless.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=devel
ARG REVISION=unknown
LABEL org.opencontainers.image.title="cipherd" \
      org.opencontainers.image.description="HTTP crypto-offload service: AEAD encryption under named, versioned keys" \
      org.opencontainers.image.source="https://github.com/cipherd/cipherd" \
      org.opencontainers.image.url="https://github.com/cipherd/cipherd" \
      org.opencontainers.image.documentation="https://github.com/cipherd/cipherd/blob/main/docs/OPERATIONS.md" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="gcr.io/distroless/static-debian12:nonroot"
COPY --from=build /out/cipherd /usr/local/bin/cipherd
COPY --from=build --chown=65532:65532 --chmod=0700 /out/data /data
# ":8080" listens on every address, IPv4 and IPv6: loopback, the default
# outside containers, is unreachable from outside the container.
ENV CIPHERD_ADDR=:8080 \
    CIPHERD_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 8080
USER 65532:65532
# The exec form: the distroless image has no shell and no curl. `cipherd
# health` asks http://127.0.0.1:8080/readyz (CIPHERD_URL changes it) and
# gives up after its own -timeout, inside Docker's --timeout.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["/usr/local/bin/cipherd", "health", "-q", "-timeout", "3s"]
ENTRYPOINT ["/usr/local/bin/cipherd"]
CMD ["serve"]
