package app

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// The configuration every Kubernetes client of talos-ccm is built from (the pipeline's, the lease's, the
// apiserver probe's and the metrics port's reviews) speaks protobuf and accepts JSON, as
// kube-controller-manager's does, without changing the configuration it was given.
func TestKubeRestConfigSpeaksProtobuf(t *testing.T) {
	t.Parallel()

	given := &rest.Config{Host: "https://127.0.0.1:1"}

	cfg, err := kubeRestConfig(Options{RestConfig: given})
	require.NoError(t, err)

	require.Equal(t, "application/vnd.kubernetes.protobuf", cfg.ContentType)
	require.Equal(t, "application/vnd.kubernetes.protobuf,application/json", cfg.AcceptContentTypes)
	require.Empty(t, given.ContentType)
}
