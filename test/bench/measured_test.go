package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFlagDefault(t *testing.T) {
	t.Parallel()

	const help = `Usage of talos-ccm:
      --concurrency int                          Nodes written at once (default 64)
      --config string                            config file: global settings (explicit flags win over it)
      --kube-api-burst int                       burst of queries to the Kubernetes API (default 1000)
      --kube-api-qps float32                     queries per second to the Kubernetes API (default 500)
      --log-level string                         log level (default "info")
  -v, --verbosity int                            klog verbosity (default 2)
      --state-dir string                         where decisions are kept; see --concurrency (default 8)
`

	for _, tc := range []struct {
		name, want string
		found      bool
	}{
		{name: "concurrency", want: "64", found: true},
		{name: "kube-api-qps", want: "500", found: true},
		{name: "kube-api-burst", want: "1000", found: true},
		{name: "log-level", want: "info", found: true},
		{name: "verbosity", want: "2", found: true},
		// A flag without a default, a flag only named in another flag's help, and a prefix of a flag.
		{name: "config"},
		{name: "kube-api"},
		{name: "missing"},
	} {
		got, found := flagDefault(help, tc.name)

		assert.Equal(t, tc.found, found, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
}
