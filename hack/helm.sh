#!/usr/bin/env bash
# Builds the helm command from its Go module (nothing but Go modules can be downloaded here), once
# per version, and prints the path of the binary. Stdout carries only that path; progress goes to
# stderr, so
#
#   "$(hack/helm.sh)" template deploy/helm/talos-ccm
#
# works from any directory. The version comes from hack/helm/go.mod: bumping it there rebuilds into
# a new cache directory.
#
# Environment:
#   TALOS_CCM_HELM       used as is when it names an executable (a helm of your own).
#   TALOS_CCM_HELM_DIR   cache root (default: $XDG_CACHE_HOME/talos-ccm/helm, or
#                        $HOME/.cache/talos-ccm/helm).
#   GO                   the go command (default: go).

set -euo pipefail

GO="${GO:-go}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
helper="${root}/hack/helm"

log() {
	printf 'helm: %s\n' "$*" >&2
}

die() {
	log "error: $*"
	exit 1
}

if [[ -n "${TALOS_CCM_HELM:-}" ]]; then
	[[ -x "${TALOS_CCM_HELM}" ]] || die "TALOS_CCM_HELM=${TALOS_CCM_HELM} is not an executable"

	printf '%s\n' "${TALOS_CCM_HELM}"
	exit 0
fi

# The module path of Helm carries its major version (helm.sh/helm/v4); take whichever is required.
read -r module version < <(awk '
	$1 == "require" && $2 ~ /^helm\.sh\/helm\// { print $2, $3; exit }
	$1 ~ /^helm\.sh\/helm\// && $2 ~ /^v/ { print $1, $2; exit }
' "${helper}/go.mod") || true

[[ -n "${module:-}" && -n "${version:-}" ]] || die "helm.sh/helm is not required in hack/helm/go.mod"

cache_root="${TALOS_CCM_HELM_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/talos-ccm/helm}"

# shellcheck source=hack/lib/cached_tool.sh
source "${root}/hack/lib/cached_tool.sh"

# helm reports the version stamped here.
cached_tool helm "${cache_root}" "${version}" "${helper}" "${module}/cmd/helm" "-s -w -X=${module}/internal/version.version=${version}"
