// Package kubekeys names the Kubernetes keys talos-ccm reads or writes: the taints, labels and annotations
// of Nodes, and the annotations, class and condition of Services. The keys are persisted on the objects of
// every cluster talos-ccm ran in, so a key never changes once released.
//
// It imports nothing, so that every layer, from the sources to the sinks, the CLI and the simulator, can
// share one spelling of each key.
package kubekeys
