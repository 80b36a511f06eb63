// Command etcd is the upstream etcd server, built from the go.etcd.io/etcd/server/v3 module that
// k8s.io/kubernetes depends on, for the end-to-end tests' control plane. Unlike the upstream
// binary it stops when the process that started it exits.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"

	"github.com/talos-ccm/talos-ccm/hack/envtest/internal/parentdeath"
)

func main() {
	parentdeath.Enable()

	etcdmain.Main(os.Args)
}
