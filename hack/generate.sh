#!/usr/bin/env bash
# Regenerates the Go code of the resource specs from api/proto with protoc and the pinned protoc-gen-go.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v protoc >/dev/null 2>&1; then
	echo "protoc not found: install Debian's protobuf-compiler (apt-get install -y protobuf-compiler)" >&2
	exit 1
fi

bindir=$(mktemp -d)
trap 'rm -rf "$bindir"' EXIT
go build -o "$bindir/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
go build -o "$bindir/protoc-gen-go-vtproto" github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto

# CloneVT and EqualVT: the COSI runtime copies a resource's spec at every read and compares it at every
# write, and uses these instead of protobuf's reflection when a spec has them (several times faster, and
# far less garbage).
PATH="$bindir:$PATH" protoc \
	--proto_path=api/proto \
	--go_out=. --go_opt=module=github.com/talos-ccm/talos-ccm \
	--go-vtproto_out=. --go-vtproto_opt=module=github.com/talos-ccm/talos-ccm,features=clone+equal \
	api/proto/specs/*.proto

# The YAML methods of every registered resource type's spec.
go run ./hack/yamlmethods
