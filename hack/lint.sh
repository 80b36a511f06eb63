#!/usr/bin/env bash
# Builds golangci-lint from its Go module (nothing but Go modules can be downloaded here), once per
# version, and prints the path of the binary. Stdout carries only that path; progress goes to stderr,
# so
#
#   "$(hack/lint.sh)" run ./...
#
# works from any directory (`make lint` does this with the repository's .golangci.yml). The version
# comes from hack/lint/go.mod: bumping it there (GOFLAGS=-mod=mod go get -tool
# github.com/golangci/golangci-lint/v2/cmd/golangci-lint@vX.Y.Z in hack/lint) rebuilds into a new
# cache directory.
#
# Environment:
#   TALOS_CCM_GOLANGCI_LINT   used as is when it names an executable (a golangci-lint of your own).
#   TALOS_CCM_LINT_DIR        cache root (default: $XDG_CACHE_HOME/talos-ccm/lint, or
#                             $HOME/.cache/talos-ccm/lint).
#   GO                        the go command (default: go).

set -euo pipefail

GO="${GO:-go}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
helper="${root}/hack/lint"
module="github.com/golangci/golangci-lint/v2"

log() {
	printf 'golangci-lint: %s\n' "$*" >&2
}

die() {
	log "error: $*"
	exit 1
}

if [[ -n "${TALOS_CCM_GOLANGCI_LINT:-}" ]]; then
	[[ -x "${TALOS_CCM_GOLANGCI_LINT}" ]] || die "TALOS_CCM_GOLANGCI_LINT=${TALOS_CCM_GOLANGCI_LINT} is not an executable"

	printf '%s\n' "${TALOS_CCM_GOLANGCI_LINT}"
	exit 0
fi

version="$(awk -v m="${module}" '
	$1 == "require" && $2 == m { print $3; exit }
	$1 == m && $2 ~ /^v/ { print $2; exit }
' "${helper}/go.mod")"

[[ -n "${version}" ]] || die "${module} is not required in hack/lint/go.mod"

cache_root="${TALOS_CCM_LINT_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/talos-ccm/lint}"

# shellcheck source=hack/lib/cached_tool.sh
source "${root}/hack/lib/cached_tool.sh"

# golangci-lint reports the version stamped here.
cached_tool golangci-lint "${cache_root}" "${version}" "${helper}" "${module}/cmd/golangci-lint" "-s -w -X=main.version=${version#v}"
