# Shared by hack/helm.sh and hack/lint.sh (sourced, not run): builds a command from a Go module of a
# helper directory, once per version, into a cache, and prints the binary's path on stdout.
#
# cached_tool NAME CACHE_ROOT VERSION HELPER PACKAGE LDFLAGS
#   NAME        the binary's name (also in the log lines)
#   CACHE_ROOT  where versions are kept: CACHE_ROOT/VERSION/NAME
#   HELPER      the directory of the go.mod that requires the module
#   PACKAGE     the main package to build
#   LDFLAGS     the -ldflags of the build (the version stamp)
# The caller defines log and die, and sets GO.
cached_tool() {
	local name="$1" cache_root="$2" version="$3" helper="$4" package="$5" ldflags="$6"
	local dest="${cache_root}/${version}/${name}"

	if [[ -x "${dest}" ]]; then
		printf '%s\n' "${dest}"
		return 0
	fi

	mkdir -p "${cache_root}"

	# Several callers may build at once (parallel test packages, two checkouts): the first one builds,
	# the others wait for it and then find the binary in place.
	exec 9>"${cache_root}/.lock"

	if ! flock --nonblock 9; then
		log "waiting for another build of ${name} to finish..."
		flock 9
	fi

	if [[ -x "${dest}" ]]; then
		printf '%s\n' "${dest}"
		return 0
	fi

	# Only the holder of the lock builds, so any other build directory was left by a killed build.
	rm -rf "${cache_root}"/.build.*

	local tmp
	tmp="$(mktemp -d "${cache_root}/.build.XXXXXX")"
	# shellcheck disable=SC2064 # the directory is fixed now
	trap "rm -rf '${tmp}'" EXIT

	local started="${SECONDS}"
	log "building ${name} ${version} from Go modules (a cold build takes a few minutes)..."

	# The helper module must not pick up a go.work of the caller's, and the build does not inherit the
	# lock.
	(cd "${helper}" && GOWORK=off CGO_ENABLED=0 "${GO}" build -trimpath -ldflags="${ldflags}" \
		-o "${tmp}/${name}" "${package}") >&2 9>&- ||
		die "failed to build ${name} ${version}"

	log "built ${name} ${version} in $((SECONDS - started))s"

	# mktemp made the directory private; the binary is not a secret.
	chmod 0755 "${tmp}"
	mkdir -p "$(dirname "${dest}")"
	mv -f "${tmp}/${name}" "${dest}"

	printf '%s\n' "${dest}"
}
