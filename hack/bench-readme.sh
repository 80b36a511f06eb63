#!/usr/bin/env bash
# Copies the bench's report into README.md: the lines between <!-- bench-table:begin --> and
# <!-- bench-table:end --> become the report (written by `make bench` to bench/results/report.txt) in a
# code fence. The README's table is only ever written this way, never by hand. Fails, changing nothing,
# when the markers are missing.
#
#   hack/bench-readme.sh [REPORT [README]]   (defaults: bench/results/report.txt, README.md)

set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
report="${1:-${root}/bench/results/report.txt}"
readme="${2:-${root}/README.md}"

cd "${root}"
go run ./test/bench/readme "${readme}" "${report}"
