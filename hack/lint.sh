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
dest="${cache_root}/${version}/golangci-lint"

if [[ -x "${dest}" ]]; then
	printf '%s\n' "${dest}"
	exit 0
fi

mkdir -p "${cache_root}"

# Two callers may build at once (make lint in two checkouts): the first one builds, the other waits
# for it and then finds the binary in place.
exec 9>"${cache_root}/.lock"

if ! flock --nonblock 9; then
	log "waiting for another build of golangci-lint to finish..."
	flock 9
fi

if [[ -x "${dest}" ]]; then
	printf '%s\n' "${dest}"
	exit 0
fi

# Only the holder of the lock builds, so any other build directory was left by a killed build.
rm -rf "${cache_root}"/.build.*

tmp="$(mktemp -d "${cache_root}/.build.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT

started="${SECONDS}"
log "building golangci-lint ${version} from Go modules (a cold build takes a few minutes)..."

# golangci-lint reports the version set here (goreleaser sets it in its releases). The helper module
# must not pick up a go.work of the caller's, and the build does not inherit the lock.
(cd "${helper}" && GOWORK=off CGO_ENABLED=0 "${GO}" build -trimpath \
	-ldflags="-s -w -X=main.version=${version#v}" \
	-o "${tmp}/golangci-lint" "${module}/cmd/golangci-lint") >&2 9>&- ||
	die "failed to build golangci-lint ${version}"

log "built golangci-lint ${version} in $((SECONDS - started))s"

# mktemp made the directory private; the binary is not a secret.
chmod 0755 "${tmp}"
mkdir -p "$(dirname "${dest}")"
mv -f "${tmp}/golangci-lint" "${dest}"

printf '%s\n' "${dest}"
