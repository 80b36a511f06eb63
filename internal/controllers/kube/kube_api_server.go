package kube

import (
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// KubeAPIServerController mirrors the endpoints of the default/kubernetes Service, the apiserver's own
// IPs, into the KubeAPIServer, with MirrorAPIServer; KubeSync "apiserver" says once the first list is
// mirrored, so that a missing KubeAPIServer then means no EndpointSlice. It decides nothing: the CSR
// approver refuses those IPs to every node but their own. Its informer comes from NewAPIServerInformer.
type KubeAPIServerController = MirrorController[apiServerMirror, *discoveryv1.EndpointSlice, *kube.KubeAPIServer]

type apiServerMirror struct{}

// Settings implements MirrorKind.
func (apiServerMirror) Settings() MirrorSettings[*discoveryv1.EndpointSlice, *kube.KubeAPIServer] {
	return MirrorSettings[*discoveryv1.EndpointSlice, *kube.KubeAPIServer]{
		Name:        "kube.KubeAPIServerController",
		Object:      "apiserver endpoint slice",
		SyncID:      kube.APIServerSyncID,
		NewResource: kube.NewKubeAPIServer,
		// Only the default/kubernetes Service's, whatever the informer was built with.
		Mirrored: func(slice *discoveryv1.EndpointSlice) bool {
			return slice.Namespace == APIServerNamespace && slice.Name == APIServerService
		},
		Fill: func(slice *discoveryv1.EndpointSlice, res *kube.KubeAPIServer) {
			res.TypedSpec().Value = MirrorAPIServer(slice)
		},
	}
}
