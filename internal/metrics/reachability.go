package metrics

import "github.com/prometheus/client_golang/prometheus"

// APIReachable is 1 while talos-ccm reaches an API it depends on, 0 while it does not, by API (kubernetes,
// talos).
var APIReachable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: Namespace,
	Name:      "api_reachable",
	Help:      "1 while talos-ccm reaches the API (kubernetes: the kube-apiserver answers and is ready; talos: the Talos API endpoint accepts connections), 0 while it does not.",
}, []string{"api"})

func init() {
	Registry.MustRegister(APIReachable)
}
