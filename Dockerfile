# syntax=docker/dockerfile:1
# talos-ccm image: static binaries (talos-ccm, and ccmctl to inspect it) on a distroless base, running as a
# non-root user.

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
    go build -ldflags="-s -w -X main.version=${VERSION}" -o /out/bin/ ./cmd/talos-ccm ./cmd/ccmctl
# The working directory holds the default --state-dir (./state) and its API socket (state/ccm.sock), where
# `kubectl exec deploy/talos-ccm -- ccmctl ...` finds it: it must belong to the non-root user.
RUN mkdir -p /out/var-lib-talos-ccm

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/bin/talos-ccm /out/bin/ccmctl /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/var-lib-talos-ccm /var/lib/talos-ccm
USER 65532:65532
WORKDIR /var/lib/talos-ccm
ENTRYPOINT ["/usr/local/bin/talos-ccm"]
