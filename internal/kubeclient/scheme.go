// Package kubeclient holds talos-ccm's Kubernetes clients and informers for exactly the API groups it uses.
//
// client-go's Clientset, its shared informer factory and each of its typed client packages import
// k8s.io/client-go/kubernetes/scheme, which registers every built-in API group (about 55 group versions, with
// their protobuf descriptors and apply configurations). That code is linked into the binary and its pages
// are in every talos-ccm pod's resident memory, although talos-ccm reads and writes six groups. This package
// registers only those, and builds typed clients of its own over rest.RESTClient (see TypedClient) with the
// method signatures of client-go's typed interfaces: a consumer declares the few methods it calls, and its
// tests may pass client-go's fake clients.
package kubeclient

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// Scheme knows the API groups talos-ccm uses, and no other: core/v1 (Nodes, Services, Events), certificates/v1
// (CertificateSigningRequests), coordination/v1 (the leader Lease), discovery/v1 (the apiserver's
// EndpointSlice), authentication/v1 and authorization/v1 (the metrics port's reviews). The event recorder
// reads it to name the kind of the object an Event is about.
var Scheme = runtime.NewScheme()

// Codecs are Scheme's serializers: protobuf, JSON and YAML.
var Codecs = serializer.NewCodecFactory(Scheme)

// ParameterCodec encodes the options of requests (ListOptions and the like) as query parameters.
var ParameterCodec = runtime.NewParameterCodec(Scheme)

// groups are the API group versions of Scheme, with the function that registers each.
var groups = []struct {
	gv       schema.GroupVersion
	register func(*runtime.Scheme) error
}{
	{corev1.SchemeGroupVersion, corev1.AddToScheme},
	{certificatesv1.SchemeGroupVersion, certificatesv1.AddToScheme},
	{coordinationv1.SchemeGroupVersion, coordinationv1.AddToScheme},
	{discoveryv1.SchemeGroupVersion, discoveryv1.AddToScheme},
	{authenticationv1.SchemeGroupVersion, authenticationv1.AddToScheme},
	{authorizationv1.SchemeGroupVersion, authorizationv1.AddToScheme},
}

func init() {
	// The unversioned meta types (Status, WatchEvent, the options) as client-go's own scheme registers them.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})

	for _, g := range groups {
		utilruntime.Must(g.register(Scheme))
	}
}
