#!/usr/bin/env bash
# Builds kube-apiserver and etcd for the end-to-end tests from Go modules (nothing else can be
# downloaded here), once per version, and prints the directory that holds them, for
# KUBEBUILDER_ASSETS. Stdout carries only that directory; progress goes to stderr, so
#
#   KUBEBUILDER_ASSETS="$(hack/envtest.sh)" go test ./...
#
# works from any directory. The versions come from hack/envtest/go.mod: bumping them there
# rebuilds into a new cache directory.
#
#   hack/envtest.sh [MINOR]
#
# MINOR (for example 1.35) builds an older supported Kubernetes minor instead, from the same sources
# with the module graph of hack/envtest/k8s-MINOR/go.mod (go build -modfile). `hack/envtest.sh list`
# prints the minors that have one, oldest first, then the current one (the minor of client-go).
#
# Environment:
#   KUBEBUILDER_ASSETS      used as is when it already holds executable kube-apiserver and etcd
#                           (without MINOR only).
#   TALOS_CCM_ENVTEST_DIR   cache root (default: $XDG_CACHE_HOME/talos-ccm/envtest, or
#                           $HOME/.cache/talos-ccm/envtest).
#   GO                      the go command (default: go).

set -euo pipefail

GO="${GO:-go}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
helper="${root}/hack/envtest"

log() {
	printf 'envtest: %s\n' "$*" >&2
}

die() {
	log "error: $*"
	exit 1
}

# has_binaries DIR succeeds when DIR holds both executables.
has_binaries() {
	[[ -x "$1/kube-apiserver" && -x "$1/etcd" ]]
}

# minor_of_modfile FILE prints the Kubernetes minor (1.X) that the go.mod FILE builds.
minor_of_modfile() {
	awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { split($2, v, "."); print substr(v[1], 2) "." v[2]; exit }' "$1"
}

minor="${1:-}"

if [[ "${minor}" == list ]]; then
	for f in "${helper}"/k8s-*/go.mod; do
		[[ -e "${f}" ]] && minor_of_modfile "${f}"
	done | sort -t. -k2,2n
	minor_of_modfile "${helper}/go.mod"
	exit 0
fi

# The go.mod that this build reads: the module's own, or an older minor's (relative to ${helper}).
modfile=go.mod

if [[ -n "${minor}" ]]; then
	[[ "${minor}" =~ ^1\.[0-9]+$ ]] || die "MINOR must look like 1.35, not ${minor}"

	if [[ "$(minor_of_modfile "${helper}/go.mod")" != "${minor}" ]]; then
		modfile="k8s-${minor}/go.mod"
		[[ -f "${helper}/${modfile}" ]] || die "no hack/envtest/${modfile}: supported minors are $("$0" list | paste -sd' ')"
		[[ "$(minor_of_modfile "${helper}/${modfile}")" == "${minor}" ]] ||
			die "hack/envtest/${modfile} builds Kubernetes $(minor_of_modfile "${helper}/${modfile}"), not ${minor}"
	fi

	# An explicit minor never takes the caller's KUBEBUILDER_ASSETS, which holds some other version.
	unset KUBEBUILDER_ASSETS
fi

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
	if has_binaries "${KUBEBUILDER_ASSETS}"; then
		printf '%s\n' "${KUBEBUILDER_ASSETS}"
		exit 0
	fi

	log "KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS} lacks kube-apiserver or etcd, building them instead"
fi

# module_version FILE MODULE prints the version of MODULE required by the go.mod FILE.
module_version() {
	awk -v mod="$2" '
		$1 == "require" && $2 == mod { print $3; exit }
		$1 == mod && $2 ~ /^v/ { print $2; exit }
	' "$1"
}

k8s_version="$(module_version "${helper}/${modfile}" k8s.io/kubernetes)"
etcd_version="$(module_version "${helper}/${modfile}" go.etcd.io/etcd/server/v3)"
client_go_version="$(module_version "${root}/go.mod" k8s.io/client-go)"

[[ -n "${k8s_version}" ]] || die "k8s.io/kubernetes is not required in hack/envtest/${modfile}"
[[ -n "${etcd_version}" ]] || die "go.etcd.io/etcd/server/v3 is not required in hack/envtest/${modfile}"
[[ -n "${client_go_version}" ]] || die "k8s.io/client-go is not required in go.mod"

# Kubernetes v1.X.Y ships its staging modules (client-go among them) as v0.X.Y.
IFS=. read -r _ k8s_minor k8s_patch <<<"${k8s_version}"
IFS=. read -r _ client_go_minor _ <<<"${client_go_version}"

# Only the default build follows client-go; an older minor's go.mod is checked against itself below.
if [[ "${modfile}" == go.mod && "${k8s_minor}" != "${client_go_minor}" ]]; then
	die "go.mod requires k8s.io/client-go ${client_go_version} but hack/envtest/go.mod builds" \
		"kube-apiserver ${k8s_version}: their minor versions must match (client-go v0.X.Y goes with" \
		"Kubernetes v1.X.Y); bump k8s.io/kubernetes and every k8s.io replace in hack/envtest/go.mod"
fi

# Every staging module must be replaced with the release matching k8s.io/kubernetes, or the build
# mixes Kubernetes versions.
staging_version="v0.${k8s_minor}.${k8s_patch}"
mismatched="$(awk -v want="${staging_version}" '
	$1 ~ /^k8s\.io\// && $2 == "=>" && $4 != want { print $1 " " $4 }
' "${helper}/${modfile}")"

if [[ -n "${mismatched}" ]]; then
	die "hack/envtest/${modfile} replaces staging modules with versions other than ${staging_version}:" \
		"$(paste -sd, - <<<"${mismatched}" | sed 's/,/, /g')"
fi

cache_root="${TALOS_CCM_ENVTEST_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/talos-ccm/envtest}"
dest="${cache_root}/k8s-${k8s_version}-etcd-${etcd_version}"

if has_binaries "${dest}"; then
	printf '%s\n' "${dest}"
	exit 0
fi

mkdir -p "${cache_root}"

# Parallel test packages may all call this script at once: the first one builds, the others wait
# for it and then find the binaries in place.
exec 9>"${cache_root}/.lock"

if ! flock --nonblock 9; then
	log "waiting for another build of the envtest binaries to finish..."
	flock 9
fi

if has_binaries "${dest}"; then
	printf '%s\n' "${dest}"
	exit 0
fi

# Only the holder of the lock builds, so any other build directory was left by a killed build.
rm -rf "${cache_root}"/.build.*

# Build next to the destination, so that moving the finished directory into place is one rename.
tmp="$(mktemp -d "${cache_root}/.build.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT

ldflags=(
	-s -w
	"-X=k8s.io/component-base/version.gitVersion=${k8s_version}"
	"-X=k8s.io/component-base/version.gitMajor=1"
	"-X=k8s.io/component-base/version.gitMinor=${k8s_minor}"
	"-X=k8s.io/component-base/version.gitTreeState=clean"
)

build() {
	local name="$1" version="$2"
	local started="${SECONDS}"

	log "building ${name} ${version} from Go modules (a cold build takes several minutes)..."

	# The helper module must not pick up a go.work of the caller's, and the build does not inherit
	# the lock, which must not outlive this script.
	(cd "${helper}" && GOWORK=off CGO_ENABLED=0 "${GO}" build -modfile="${modfile}" -trimpath -ldflags="${ldflags[*]}" \
		-o "${tmp}/${name}" "./cmd/${name}") >&2 9>&- ||
		die "failed to build ${name} ${version}"

	log "built ${name} ${version} in $((SECONDS - started))s"
}

build etcd "${etcd_version}"
build kube-apiserver "${k8s_version}"

# mktemp made the directory private; the binaries are not secrets.
chmod 0755 "${tmp}"

# A directory left half-built by an older version of this script, or by hand, is replaced.
rm -rf "${dest}"
mv -T "${tmp}" "${dest}"
trap - EXIT

printf '%s\n' "${dest}"
