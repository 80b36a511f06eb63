// Package cosistate holds the COSI states talos-ccm's pipelines run on: the in-memory namespaces whose
// reads share the stored resources and whose watches cost no goroutine while idle and never fall behind
// (MemoryStateBuilder), and the prefixed view of a host's state that gives each embedded cluster
// namespaces of its own.
package cosistate
