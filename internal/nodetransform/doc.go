// Package nodetransform decides what talos-ccm wants on one Kubernetes Node (Build): its providerID,
// labels, annotations, taints and addresses, from the machine's Talos facts and the config's
// transformation rules, and whether the facts are the Node's at all (the machine must name itself the
// Node). It is a pure function of its input, imports no controller, and is shared by the NodeTransform
// controller and `ccmctl config test`, which must give the same answer.
package nodetransform
