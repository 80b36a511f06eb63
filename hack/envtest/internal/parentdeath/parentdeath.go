// Package parentdeath ties the lifetime of the control plane binaries to the process that started
// them.
//
// controller-runtime's envtest starts etcd and kube-apiserver in their own process groups and stops
// them from the test binary. A test binary that dies first (a panic, a `go test -timeout` kill, a
// SIGKILL) would leave both running for good, each holding ports, a data directory and a share of
// the machine. These binaries exist only for tests, so they ask to be stopped with their parent.
package parentdeath
