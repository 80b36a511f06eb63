package kube

import (
	"net/netip"
	"slices"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

// The Service whose endpoints are the apiserver's own: the apiserver keeps its EndpointSlice, of the same
// name, up to date itself.
const (
	APIServerNamespace = "default"
	APIServerService   = "kubernetes"
)

// maxAPIServerIPs bounds the endpoints mirrored: an EndpointSlice holds at most 1,000.
const maxAPIServerIPs = 1000

// NewAPIServerInformer returns an informer on the EndpointSlice of the default/kubernetes Service alone
// (it needs get, list and watch on endpointslices in the namespace default only). Pass it to a
// kubeclient.Informers' For, so that it is started and synced with the others. Its watches ask for no
// bookmarks: one object that changes when a control-plane machine comes or goes is listed again when a
// watch ends rather than kept fresh by a bookmark a minute (see InlineInformer.WithoutBookmarks).
func NewAPIServerInformer(client *kubeclient.Client) *kubeclient.InlineInformer {
	return kubeclient.NewInformer(client.EndpointSlices(APIServerNamespace), &discoveryv1.EndpointSlice{},
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", APIServerService).String()
		}, nil).WithoutBookmarks()
}

// MirrorAPIServer extracts the endpoint IPs of the default/kubernetes Service's EndpointSlice, ready or
// not (an apiserver that is starting is still the apiserver), sorted and deduplicated.
func MirrorAPIServer(slice *discoveryv1.EndpointSlice) *specs.KubeAPIServerSpec {
	var ips []netip.Addr

	for _, e := range slice.Endpoints {
		for _, text := range e.Addresses {
			if ip, err := netip.ParseAddr(strings.TrimSpace(text)); err == nil && len(ips) < maxAPIServerIPs {
				ips = append(ips, ip.Unmap())
			}
		}
	}

	slices.SortFunc(ips, netip.Addr.Compare)
	ips = slices.Compact(ips)

	spec := &specs.KubeAPIServerSpec{}
	for _, ip := range ips {
		spec.EndpointIps = append(spec.EndpointIps, ip.String())
	}

	return spec
}
