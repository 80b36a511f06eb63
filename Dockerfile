# syntax=docker/dockerfile:1
# talos-ccm image: static binaries on a distroless base, running as a non-root user.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY api ./api
COPY cmd ./cmd
COPY internal ./internal
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -ldflags="-s -w -X main.version=${VERSION}" -o /out/talos-ccm ./cmd/talos-ccm

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/talos-ccm /usr/local/bin/talos-ccm
USER 65532:65532
WORKDIR /var/lib/talos-ccm
ENTRYPOINT ["/usr/local/bin/talos-ccm"]
