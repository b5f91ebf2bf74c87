# syntax=docker/dockerfile:1
# cipherd container image: a static binary on a distroless, non-root base.
#   docker build -t cipherd .
#   docker run --rm cipherd speed -seconds 1

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/cipherd/cipherd/internal/buildinfo.Version=${VERSION}" \
      -o /out/cipherd ./cmd/cipherd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/cipherd /usr/local/bin/cipherd
USER nonroot:nonroot
# The exec form: the distroless image has no shell and no curl.
HEALTHCHECK --interval=10s --timeout=3s CMD ["/usr/local/bin/cipherd", "health", "-q"]
ENTRYPOINT ["/usr/local/bin/cipherd"]
CMD ["serve"]
