package kube_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/controllers/kube"
)

func TestMirrorAPIServer(t *testing.T) {
	t.Parallel()

	spec := kube.MirrorAPIServer(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.12"}},
			{Addresses: []string{"10.0.0.10", " 10.0.0.11 "}},
			{Addresses: []string{"10.0.0.10", "not-an-ip"}},
			{Addresses: []string{"::ffff:10.0.0.13"}},
		},
	})

	assert.Equal(t, []string{"10.0.0.10", "10.0.0.11", "10.0.0.12", "10.0.0.13"}, spec.GetEndpointIps())
	assert.Empty(t, kube.MirrorAPIServer(&discoveryv1.EndpointSlice{}).GetEndpointIps())
}
