#!/usr/bin/env bash
# make demo: a local control plane, a simulated Talos fleet and talos-ccm initializing it.
# Extra flags for the demo program can be passed with DEMO_FLAGS, e.g. DEMO_FLAGS=--exit-when-initialized.
set -euo pipefail
cd "$(dirname "$0")/.."

assets="$(hack/envtest.sh)"
export KUBEBUILDER_ASSETS="$assets"

# shellcheck disable=SC2086
go build -o bin/demo ./test/demo
exec bin/demo --bin bin ${DEMO_FLAGS:-} "$@"
