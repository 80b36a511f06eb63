package kubeclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Client is a Kubernetes client of the resources talos-ccm reads and writes. As client-go's Clientset, it
// sends every request of every group through one HTTP client and one client-side rate limiter, those of the
// configuration it was built from.
//
// The REST client of each API group is made on the group's first use: talos-ccm gives each controller a
// client of its own (see pkg/ccm), which uses one or two of the seven, and an embedding host keeps a
// pipeline's clients for each of its clusters.
type Client struct {
	// config is the configuration every group's client is made of, with the shared rate limiter.
	config     rest.Config
	httpClient *http.Client

	core, certificates, coordination, discovery, authentication, authorization lazyGroup
	// nodes is core/v1 whose protobuf decoder trims Nodes (see trimmingNodes): the Nodes client's. It is
	// made at once: making it checks the configuration every group's client is made of.
	nodes rest.Interface
}

// lazyGroup is the REST client of the API group gv, made on the group's first use.
type lazyGroup struct {
	gv     schema.GroupVersion
	once   sync.Once
	client rest.Interface
}

// groupSerializer is what every group's client encodes and decodes with; it keeps no state of a client.
var groupSerializer = sync.OnceValue(func() runtime.NegotiatedSerializer { //nolint:gochecknoglobals // Made once, shared.
	return rest.CodecFactoryForGeneratedClient(Scheme, Codecs).WithoutConversion()
})

// NewForConfig returns a client of cfg: its server, credentials, transport, content types, user agent (client-go's
// default when empty) and rate limit (QPS and Burst, or RateLimiter), as kubernetes.NewForConfig would.
func NewForConfig(cfg *rest.Config) (*Client, error) {
	c := &Client{
		config:         *cfg,
		core:           lazyGroup{gv: corev1.SchemeGroupVersion},
		certificates:   lazyGroup{gv: certificatesv1.SchemeGroupVersion},
		coordination:   lazyGroup{gv: coordinationv1.SchemeGroupVersion},
		discovery:      lazyGroup{gv: discoveryv1.SchemeGroupVersion},
		authentication: lazyGroup{gv: authenticationv1.SchemeGroupVersion},
		authorization:  lazyGroup{gv: authorizationv1.SchemeGroupVersion},
	}

	if c.config.UserAgent == "" {
		c.config.UserAgent = rest.DefaultKubernetesUserAgent()
	}

	// One limiter for every group, as in a Clientset: a client's QPS is the client's, whichever group it asks.
	if c.config.RateLimiter == nil && c.config.QPS > 0 {
		if c.config.Burst <= 0 {
			return nil, errors.New("failed to create Kubernetes client: burst must be positive when QPS is")
		}

		c.config.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(c.config.QPS, c.config.Burst)
	}

	var err error

	if c.httpClient, err = rest.HTTPClientFor(&c.config); err != nil {
		return nil, fmt.Errorf("failed to create Kubernetes client: %w", err)
	}

	if c.nodes, err = c.newGroupClient(corev1.SchemeGroupVersion, trimmingNodes{groupSerializer()}); err != nil {
		return nil, fmt.Errorf("failed to create Kubernetes client of %s: %w", corev1.SchemeGroupVersion, err)
	}

	return c, nil
}

// newGroupClient makes the REST client of the group gv, which decodes with s.
func (c *Client) newGroupClient(gv schema.GroupVersion, s runtime.NegotiatedSerializer) (rest.Interface, error) { //nolint:ireturn
	groupConfig := c.config
	groupConfig.GroupVersion = &gv
	groupConfig.APIPath = "/apis"
	groupConfig.NegotiatedSerializer = s

	if gv.Group == "" {
		groupConfig.APIPath = "/api"
	}

	return newNegotiatingClient(&groupConfig, c.httpClient)
}

// group returns the REST client of the group g, made on its first use.
func (c *Client) group(g *lazyGroup) rest.Interface { //nolint:ireturn
	g.once.Do(func() {
		client, err := c.newGroupClient(g.gv, groupSerializer())
		if err != nil {
			// The groups' clients differ in their group and API path alone, and NewForConfig made the Nodes
			// client of the same configuration: a group's cannot fail.
			panic(fmt.Sprintf("failed to create the Kubernetes client of %s: %v", g.gv, err))
		}

		g.client = client
	})

	return g.client
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
	return &ServiceClient{TypedClient: TypedClient[*corev1.Service, corev1.Service]{c.group(&c.core), "services", namespace}}
}

// Namespaces returns the client of Namespaces, which talos-ccm only lists and watches (for the labels the
// LoadBalancer pools select namespaces by).
func (c *Client) Namespaces() *NamespaceClient {
	return &NamespaceClient{TypedClient: TypedClient[*corev1.Namespace, corev1.Namespace]{c.group(&c.core), "namespaces", ""}}
}

// Events returns the client of the Events of namespace.
func (c *Client) Events(namespace string) *EventClient {
	return &EventClient{c.group(&c.core), "events", namespace}
}

// CertificateSigningRequests returns the client of CertificateSigningRequests.
func (c *Client) CertificateSigningRequests() CSRClient {
	return CSRClient{&csrListClient{TypedClient: TypedClient[*certificatesv1.CertificateSigningRequest, certificatesv1.CertificateSigningRequest]{
		c.group(&c.certificates), "certificatesigningrequests", "",
	}}}
}

// Leases returns the client of the Leases of namespace.
func (c *Client) Leases(namespace string) *LeaseClient {
	return &LeaseClient{c.group(&c.coordination), "leases", namespace}
}

// EndpointSlices returns the client of the EndpointSlices of namespace.
func (c *Client) EndpointSlices(namespace string) *EndpointSliceClient {
	return &EndpointSliceClient{TypedClient: TypedClient[*discoveryv1.EndpointSlice, discoveryv1.EndpointSlice]{c.group(&c.discovery), "endpointslices", namespace}}
}

// TokenReviews returns the client of TokenReviews.
func (c *Client) TokenReviews() *TokenReviewClient {
	return &TokenReviewClient{c.group(&c.authentication), "tokenreviews", ""}
}

// SubjectAccessReviews returns the client of SubjectAccessReviews.
func (c *Client) SubjectAccessReviews() *SubjectAccessReviewClient {
	return &SubjectAccessReviewClient{c.group(&c.authorization), "subjectaccessreviews", ""}
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
