// Package faults is talos-ccm's fault suite: the real talos-ccm binary against a real kube-apiserver and
// etcd (envtest) and a simulated Talos fleet (talos-sim), while something goes wrong on purpose: talos-ccm
// killed with SIGKILL in the middle of initializing 1,000 nodes, the apiserver restarted, the Talos endpoint
// down for 30 seconds, a tenth of the machines answering in 3 seconds, machines reporting malformed facts.
// Every test proves that nothing is lost or undone and that talos-ccm recovers by itself, within a bound.
//
// The tests carry the build tag faults, so that `make test` does not run them: `make test-faults` does.
package faults
