# syntax=docker/dockerfile:1
# talos-ccm image: static binaries (talos-ccm, and ccmctl to inspect it) on a distroless base, running as a
# non-root user.
#
#   docker build --build-arg VERSION=v0.1.0 --build-arg COMMIT="$(git rev-parse HEAD)" -t talos-ccm .
#
# VERSION and COMMIT are what `talos-ccm --version` and `ccmctl version` print (internal/version);
# test/deploy replays the build stage below and checks them.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY api ./api
COPY cmd ./cmd
COPY internal ./internal
COPY pkg ./pkg
# Empty: "devel" and "unknown" (the build context has no .git for Go to read a revision from).
ARG VERSION=""
ARG COMMIT=""
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -ldflags="-s -w -X github.com/talos-ccm/talos-ccm/internal/version.version=${VERSION} -X github.com/talos-ccm/talos-ccm/internal/version.commit=${COMMIT}" \
    -o /out/bin/ ./cmd/talos-ccm ./cmd/ccmctl
# The working directory holds the default --state-dir (./state) and its API socket (state/ccm.sock), where
# `kubectl exec deploy/talos-ccm -- ccmctl ...` finds it: it must belong to the non-root user.
RUN mkdir -p /out/var-lib-talos-ccm

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/bin/talos-ccm /out/bin/ccmctl /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/var-lib-talos-ccm /var/lib/talos-ccm
USER 65532:65532
WORKDIR /var/lib/talos-ccm
ENTRYPOINT ["/usr/local/bin/talos-ccm"]
