package kubeclient_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

// TestNodesInformerKeepsTrimmedNodes: the Nodes informer's Nodes come trimmed off the wire, without any
// transform of the informer's: a kubelet's images and node info, the other conditions and the managed
// fields are never decoded, the addresses, the Ready condition and the metadata are.
func TestNodesInformerKeepsTrimmedNodes(t *testing.T) {
	t.Parallel()

	env, client := sharedClient(t)
	ctx := t.Context()

	node, err := client.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "kubeclient-trimmed", Labels: map[string]string{"a": "b"},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)

	node.Status = corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
		},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.9"}},
		NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.36.0"},
		Images:    []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10"}, SizeBytes: 1 << 20}},
	}

	_, err = client.Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	require.NoError(t, err)

	informers := kubeclient.NewInformers(client)
	informers.Nodes()
	startInformers(t, informers)

	eventually(t, "the trimmed Node in the informer cache", func() error {
		cached, err := informers.NodeLister().Get("kubeclient-trimmed")

		switch {
		case err != nil:
			return err
		case len(cached.Status.Addresses) != 1 || cached.Labels["a"] != "b":
			return fmt.Errorf("not the Node as written: %+v", cached)
		case len(cached.Status.Images) != 0 || cached.Status.NodeInfo.KubeletVersion != "" || len(cached.ManagedFields) != 0:
			return errors.New("the images, node info or managed fields were decoded")
		case len(cached.Status.Conditions) != 1 || cached.Status.Conditions[0].Type != corev1.NodeReady:
			return fmt.Errorf("conditions %v, want Ready alone", cached.Status.Conditions)
		}

		return nil
	})

	// The writers read the same: an update of the Node itself, from the trimmed Node, returns it trimmed, and
	// leaves the status on the server as the kubelet wrote it.
	read, err := client.Nodes().Get(ctx, "kubeclient-trimmed", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, read.Status.Images, "read trimmed")

	read.Labels["c"] = "d"

	updated, err := client.Nodes().Update(ctx, read, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Empty(t, updated.Status.Images, "the update's answer trimmed")
	require.Equal(t, "d", updated.Labels["c"])

	jsonConfig := rest.CopyConfig(env.Config)
	jsonConfig.ContentType, jsonConfig.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON

	whole, err := kubeclient.NewForConfig(jsonConfig)
	require.NoError(t, err)

	stored, err := whole.Nodes().Get(ctx, "kubeclient-trimmed", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, stored.Status.Images, 1, "the status on the server is the kubelet's")
	require.Equal(t, "v1.36.0", stored.Status.NodeInfo.KubeletVersion)
	require.Len(t, stored.Status.Conditions, 2)
}

// TestNodesInformerKeepsUnchangedMaps: a new version of a Node that changes neither its labels nor its
// annotations (a kubelet's status report) is cached with the maps of the version before, through the
// transform talos-ccm gives the Nodes informer (k8ssink.NodeTrimmer): the KubeNode mirror, which writes nothing
// for such a version, and the cache then hold one labels map between them. A version that changes the labels
// is cached with a map of its own.
func TestNodesInformerKeepsUnchangedMaps(t *testing.T) {
	t.Parallel()

	_, client := sharedClient(t)
	ctx := t.Context()

	node, err := client.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "kubeclient-unchanged-maps", Labels: map[string]string{"a": "b"},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)

	informers := kubeclient.NewInformers(client)
	require.NoError(t, informers.Nodes().SetTransform(k8ssink.NodeTrimmer(informers.Nodes().GetStore())))
	startInformers(t, informers)

	cachedAt := func(version string) *corev1.Node {
		var cached *corev1.Node

		eventually(t, "the Node at version "+version+" in the informer cache", func() error {
			var err error

			if cached, err = informers.NodeLister().Get(node.Name); err != nil {
				return err
			}

			if cached.ResourceVersion != version {
				return fmt.Errorf("at version %s", cached.ResourceVersion)
			}

			return nil
		})

		return cached
	}

	first := cachedAt(node.ResourceVersion)

	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}

	reported, err := client.Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	require.NoError(t, err)

	second := cachedAt(reported.ResourceVersion)
	require.Len(t, second.Status.Conditions, 1, "the status report cached")
	require.True(t, sameMap(first.Labels, second.Labels), "the status report's version holds the labels map of the version before")

	relabelled := reported.DeepCopy()
	relabelled.Labels["c"] = "d"

	updated, err := client.Nodes().Update(ctx, relabelled, metav1.UpdateOptions{})
	require.NoError(t, err)

	third := cachedAt(updated.ResourceVersion)
	require.False(t, sameMap(second.Labels, third.Labels), "changed labels: a map of their own")
	require.Equal(t, map[string]string{"a": "b", "c": "d"}, third.Labels)
	require.Equal(t, map[string]string{"a": "b"}, second.Labels, "the version before is as it was")
}

// sameMap reports whether a and b are one map, not two maps of the same contents.
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
