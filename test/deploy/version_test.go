package deploy_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKubernetesVersion checks that the control plane is the Kubernetes minor that `make
// test-k8s-versions` means to test (TALOS_CCM_EXPECT_K8S_MINOR), so that a wrong KUBEBUILDER_ASSETS
// cannot pass for another version. Without the variable it only logs the version.
func TestKubernetesVersion(t *testing.T) {
	t.Parallel()

	info, err := controlPlane(t).Clientset().Discovery().ServerVersion()
	require.NoError(t, err)

	t.Logf("kube-apiserver %s", info.GitVersion)

	want := os.Getenv("TALOS_CCM_EXPECT_K8S_MINOR")
	if want == "" {
		return
	}

	require.Equal(t, want, info.Major+"."+info.Minor, "the apiserver of KUBEBUILDER_ASSETS is %s", info.GitVersion)
}
