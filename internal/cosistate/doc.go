// Package cosistate holds the COSI state wrappers talos-ccm's pipelines run on: the in-memory namespaces
// whose watches are resumed when they fall behind a short history and whose reads share the stored
// resources (MemoryStateBuilder), and the prefixed view of a host's state that gives each embedded cluster
// namespaces of its own.
package cosistate
