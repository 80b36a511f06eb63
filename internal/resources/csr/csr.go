// Package csr holds the decisions about kubelet serving certificate requests.
package csr

import "github.com/cosi-project/runtime/pkg/resource"

// NamespaceName is the default namespace of the csr group.
const NamespaceName resource.Namespace = "csr"

// MaxRequestBytes is the largest kubelet serving certificate request (spec.request, PEM) that can be
// approved: the largest request rule 2 accepts, with 100 DNS names of 253 bytes and an 8,192-bit RSA key,
// is about 40 KB. A larger request is mirrored with its first MaxRequestBytes+1 bytes only, which says
// enough to deny it: every version of a mirror the in-memory state keeps for its watchers holds the bytes.
const MaxRequestBytes = 64 << 10
