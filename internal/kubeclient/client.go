package kubeclient

import (
	"context"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Client is a Kubernetes client of the resources talos-ccm reads and writes. As client-go's Clientset, it
// sends every request of every group through one HTTP client and one client-side rate limiter, those of the
// configuration it was built from.
type Client struct {
	core, certificates, coordination, discovery, authentication, authorization rest.Interface
	// nodes is core/v1 whose protobuf decoder trims Nodes (see trimmingNodes): the Nodes client's.
	nodes rest.Interface
}

// NewForConfig returns a client of cfg: its server, credentials, transport, content types, user agent (client-go's
// default when empty) and rate limit (QPS and Burst, or RateLimiter), as kubernetes.NewForConfig would.
func NewForConfig(cfg *rest.Config) (*Client, error) {
	shared := *cfg

	if shared.UserAgent == "" {
		shared.UserAgent = rest.DefaultKubernetesUserAgent()
	}

	// One limiter for every group, as in a Clientset: a client's QPS is the client's, whichever group it asks.
	if shared.RateLimiter == nil && shared.QPS > 0 {
		if shared.Burst <= 0 {
			return nil, errors.New("failed to create Kubernetes client: burst must be positive when QPS is")
		}

		shared.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(shared.QPS, shared.Burst)
	}

	httpClient, err := rest.HTTPClientFor(&shared)
	if err != nil {
		return nil, fmt.Errorf("failed to create Kubernetes client: %w", err)
	}

	c := &Client{}

	for _, g := range []struct {
		client *rest.Interface
		gv     schema.GroupVersion
	}{
		{&c.core, corev1.SchemeGroupVersion},
		{&c.certificates, certificatesv1.SchemeGroupVersion},
		{&c.coordination, coordinationv1.SchemeGroupVersion},
		{&c.discovery, discoveryv1.SchemeGroupVersion},
		{&c.authentication, authenticationv1.SchemeGroupVersion},
		{&c.authorization, authorizationv1.SchemeGroupVersion},
	} {
		groupConfig := shared
		groupConfig.GroupVersion = &g.gv
		groupConfig.APIPath = "/apis"

		if g.gv.Group == "" {
			groupConfig.APIPath = "/api"
		}

		groupConfig.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(Scheme, Codecs).WithoutConversion()

		if *g.client, err = newNegotiatingClient(&groupConfig, httpClient); err != nil {
			return nil, fmt.Errorf("failed to create Kubernetes client of %s: %w", g.gv, err)
		}
	}

	nodesConfig := shared
	nodesConfig.GroupVersion = &corev1.SchemeGroupVersion
	nodesConfig.APIPath = "/api"
	nodesConfig.NegotiatedSerializer = trimmingNodes{rest.CodecFactoryForGeneratedClient(Scheme, Codecs).WithoutConversion()}

	if c.nodes, err = newNegotiatingClient(&nodesConfig, httpClient); err != nil {
		return nil, fmt.Errorf("failed to create Kubernetes client of %s: %w", corev1.SchemeGroupVersion, err)
	}

	return c, nil
}

// Typed clients of the resources talos-ccm uses. Their methods are those of client-go's typed clients, with
// the same signatures.
type (
	// NodeClient reads and writes Nodes.
	NodeClient = ListClient[*corev1.Node, *corev1.NodeList, corev1.Node, corev1.NodeList]
	// ServiceClient reads and writes the Services of one namespace.
	ServiceClient = ListClient[*corev1.Service, *corev1.ServiceList, corev1.Service, corev1.ServiceList]
	// NamespaceClient reads Namespaces.
	NamespaceClient = ListClient[*corev1.Namespace, *corev1.NamespaceList, corev1.Namespace, corev1.NamespaceList]
	// EventClient writes the Events of one namespace.
	EventClient = TypedClient[*corev1.Event, corev1.Event]
	// LeaseClient reads and writes the Leases of one namespace.
	LeaseClient = TypedClient[*coordinationv1.Lease, coordinationv1.Lease]
	// EndpointSliceClient reads the EndpointSlices of one namespace.
	EndpointSliceClient = ListClient[*discoveryv1.EndpointSlice, *discoveryv1.EndpointSliceList, discoveryv1.EndpointSlice, discoveryv1.EndpointSliceList]
	// TokenReviewClient creates TokenReviews.
	TokenReviewClient = TypedClient[*authenticationv1.TokenReview, authenticationv1.TokenReview]
	// SubjectAccessReviewClient creates SubjectAccessReviews.
	SubjectAccessReviewClient = TypedClient[*authorizationv1.SubjectAccessReview, authorizationv1.SubjectAccessReview]
	// csrListClient reads CertificateSigningRequests.
	csrListClient = ListClient[*certificatesv1.CertificateSigningRequest, *certificatesv1.CertificateSigningRequestList,
		certificatesv1.CertificateSigningRequest, certificatesv1.CertificateSigningRequestList]
)

// Nodes returns the client of Nodes. What it reads, and what its writes return, comes trimmed as
// k8ssink.TrimNode trims a Node (when the apiserver answers in protobuf, which the client asks for): the
// metadata without managed fields, the spec, and of the status the addresses and the Ready condition, all
// talos-ccm reads of a Node. A write sends what it is given: an update of the Node itself leaves the status
// as it is on the server, whatever the object says of it.
func (c *Client) Nodes() *NodeClient {
	return &NodeClient{TypedClient: TypedClient[*corev1.Node, corev1.Node]{c.nodes, "nodes", ""}}
}

// Services returns the client of the Services of namespace ("" for every namespace, to list and watch).
func (c *Client) Services(namespace string) *ServiceClient {
	return &ServiceClient{TypedClient: TypedClient[*corev1.Service, corev1.Service]{c.core, "services", namespace}}
}

// Namespaces returns the client of Namespaces, which talos-ccm only lists and watches (for the labels the
// LoadBalancer pools select namespaces by).
func (c *Client) Namespaces() *NamespaceClient {
	return &NamespaceClient{TypedClient: TypedClient[*corev1.Namespace, corev1.Namespace]{c.core, "namespaces", ""}}
}

// Events returns the client of the Events of namespace.
func (c *Client) Events(namespace string) *EventClient {
	return &EventClient{c.core, "events", namespace}
}

// CertificateSigningRequests returns the client of CertificateSigningRequests.
func (c *Client) CertificateSigningRequests() CSRClient {
	return CSRClient{&csrListClient{TypedClient: TypedClient[*certificatesv1.CertificateSigningRequest, certificatesv1.CertificateSigningRequest]{
		c.certificates, "certificatesigningrequests", "",
	}}}
}

// Leases returns the client of the Leases of namespace.
func (c *Client) Leases(namespace string) *LeaseClient {
	return &LeaseClient{c.coordination, "leases", namespace}
}

// EndpointSlices returns the client of the EndpointSlices of namespace.
func (c *Client) EndpointSlices(namespace string) *EndpointSliceClient {
	return &EndpointSliceClient{TypedClient: TypedClient[*discoveryv1.EndpointSlice, discoveryv1.EndpointSlice]{c.discovery, "endpointslices", namespace}}
}

// TokenReviews returns the client of TokenReviews.
func (c *Client) TokenReviews() *TokenReviewClient {
	return &TokenReviewClient{c.authentication, "tokenreviews", ""}
}

// SubjectAccessReviews returns the client of SubjectAccessReviews.
func (c *Client) SubjectAccessReviews() *SubjectAccessReviewClient {
	return &SubjectAccessReviewClient{c.authorization, "subjectaccessreviews", ""}
}

// CSRClient reads CertificateSigningRequests and approves or denies them.
type CSRClient struct {
	*csrListClient
}

// UpdateApproval writes the approval subresource of the request name: its Approved or Denied condition.
func (c CSRClient) UpdateApproval(
	ctx context.Context, name string, csr *certificatesv1.CertificateSigningRequest, opts metav1.UpdateOptions,
) (*certificatesv1.CertificateSigningRequest, error) {
	result := &certificatesv1.CertificateSigningRequest{}
	err := c.request(c.client.Put).
		Name(name).
		SubResource("approval").
		VersionedParams(&opts, ParameterCodec).
		Body(csr).
		Do(ctx).
		Into(result)

	return result, err //nolint:wrapcheck // The signature is client-go's: its errors are the apiserver's.
}
