// Command kube-apiserver is the upstream Kubernetes API server, built from the k8s.io/kubernetes
// module pinned in this module's go.mod, for the end-to-end tests' control plane. Unlike the
// upstream binary it stops when the process that started it exits.
package main

import (
	"os"
	_ "time/tzdata" // Time zone data for CronJob validation, as in the upstream binary.

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // The JSON log format, as upstream.
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream.
	_ "k8s.io/component-base/metrics/prometheus/version"  // The version metric, as upstream.
	"k8s.io/kubernetes/cmd/kube-apiserver/app"

	"github.com/talos-ccm/talos-ccm/hack/envtest/internal/parentdeath"
)

func main() {
	parentdeath.Enable()

	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
