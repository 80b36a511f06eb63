package talossim_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

var (
	digestName = regexp.MustCompile(`^([a-z0-9.-]+/[a-z0-9./-]+)@sha256:[0-9a-f]{64}$`)
	tagName    = regexp.MustCompile(`^([a-z0-9.-]+/[a-z0-9./-]+):[A-Za-z0-9._-]+$`)
)

func TestKubeletStatus(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	machines := talossim.Generate(2, 1)
	status := talossim.KubeletStatus(machines[0], talossim.DefaultKubeletVersion, now)

	require.Len(t, status.Images, talossim.NodeStatusImages)

	for i, img := range status.Images {
		require.Len(t, img.Names, 2, "a digest and a tag")

		digest, tag := digestName.FindStringSubmatch(img.Names[0]), tagName.FindStringSubmatch(img.Names[1])
		require.NotNil(t, digest, img.Names[0])
		require.NotNil(t, tag, img.Names[1])
		assert.Equal(t, digest[1], tag[1], "both names are of one repository")
		assert.Greater(t, img.SizeBytes, int64(100<<10))
		assert.Less(t, img.SizeBytes, int64(1<<30))

		if i > 0 {
			assert.LessOrEqual(t, img.SizeBytes, status.Images[i-1].SizeBytes, "largest first, as a kubelet lists them")
		}
	}

	assert.Contains(t, imageNames(status), "registry.k8s.io/kube-proxy:"+talossim.DefaultKubeletVersion)

	again := talossim.KubeletStatus(machines[0], talossim.DefaultKubeletVersion, now.Add(time.Hour))
	assert.Equal(t, status.Images, again.Images, "a machine's images are the same on every run")
	assert.NotEqual(t, imageNames(status), imageNames(talossim.KubeletStatus(machines[1], talossim.DefaultKubeletVersion, now)),
		"machines differ in their images")

	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		capacity, allocatable := status.Capacity[name], status.Allocatable[name]
		assert.Equal(t, -1, allocatable.Cmp(capacity), "allocatable %s below capacity", name)
	}

	for _, name := range []corev1.ResourceName{corev1.ResourcePods, "hugepages-1Gi", "hugepages-2Mi"} {
		assert.Contains(t, status.Capacity, name)
		assert.Contains(t, status.Allocatable, name)
	}

	assert.Equal(t, map[corev1.NodeConditionType]string{
		corev1.NodeMemoryPressure: "False kubelet has sufficient memory available",
		corev1.NodeDiskPressure:   "False kubelet has no disk pressure",
		corev1.NodePIDPressure:    "False kubelet has sufficient PID available",
		corev1.NodeReady:          "True kubelet is posting ready status",
	}, conditionTexts(status))

	for _, cond := range status.Conditions {
		assert.Equal(t, metav1.NewTime(now), cond.LastHeartbeatTime)
	}

	assert.Equal(t, machines[0].System.UUID, status.NodeInfo.SystemUUID)
	assert.Equal(t, strings.ReplaceAll(machines[0].System.UUID, "-", ""), status.NodeInfo.MachineID)
	assert.Equal(t, talossim.DefaultKubeletVersion, status.NodeInfo.KubeletVersion)
	assert.Equal(t, int32(10250), status.DaemonEndpoints.KubeletEndpoint.Port)
	assert.Empty(t, status.Addresses, "the CCM sets them")
	assert.Empty(t, status.VolumesInUse)
	assert.Empty(t, status.VolumesAttached)

	// A real kubelet's Node with 50 images is 15 to 20 KB of JSON once the apiserver has added its
	// metadata (TestKubelets checks the stored one); the status is most of it.
	statusJSON, err := json.Marshal(status)
	require.NoError(t, err)
	assert.Greater(t, len(statusJSON), 10_000)
	assert.Less(t, len(statusJSON), 16_000)

	statusProto, err := status.Marshal()
	require.NoError(t, err)
	assert.Greater(t, len(statusProto), 8_000)
	assert.Less(t, len(statusProto), len(statusJSON))
}

func TestKubeletStatusWithoutSystemInformation(t *testing.T) {
	t.Parallel()

	now := time.Now()
	first := talossim.KubeletStatus(talossim.Machine{Name: "floor-00001"}, talossim.DefaultKubeletVersion, now)
	second := talossim.KubeletStatus(talossim.Machine{Name: "floor-00001"}, talossim.DefaultKubeletVersion, now)

	assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`, first.NodeInfo.SystemUUID)
	assert.Equal(t, first.NodeInfo.SystemUUID, second.NodeInfo.SystemUUID, "drawn from the name")
	assert.NotEqual(t, first.NodeInfo.BootID, second.NodeInfo.BootID, "a boot ID per boot")
}

func imageNames(status corev1.NodeStatus) []string {
	var names []string

	for _, img := range status.Images {
		names = append(names, img.Names...)
	}

	return names
}

func conditionTexts(status corev1.NodeStatus) map[corev1.NodeConditionType]string {
	out := map[corev1.NodeConditionType]string{}

	for _, cond := range status.Conditions {
		out[cond.Type] = string(cond.Status) + " " + cond.Message
	}

	return out
}

func TestBareKubeletStatus(t *testing.T) {
	t.Parallel()

	full := talossim.KubeletStatus(talossim.Generate(1, 1)[0], talossim.DefaultKubeletVersion, time.Now())
	bare := talossim.BareKubeletStatus(full)

	assert.Empty(t, bare.Images)
	assert.Empty(t, bare.RuntimeHandlers)
	assert.Nil(t, bare.Features)
	assert.NotContains(t, bare.Capacity, corev1.ResourceName("hugepages-2Mi"))
	assert.NotContains(t, bare.Allocatable, corev1.ResourceName("hugepages-1Gi"))
	assert.Contains(t, full.Capacity, corev1.ResourceName("hugepages-2Mi"), "the kubelet's status is left alone")
	assert.Equal(t, full.Conditions, bare.Conditions)
	assert.Equal(t, full.NodeInfo, bare.NodeInfo)

	bareJSON, err := json.Marshal(bare)
	require.NoError(t, err)
	assert.Less(t, len(bareJSON), 2_500)
}
