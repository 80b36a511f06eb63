package kubeclient

import (
	"context"
	"sync"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Informers are the informers of one client, started, synced and stopped together, as client-go's
// SharedInformerFactory does for its own: an informer is made on first use, Start starts those not started
// yet, and Shutdown waits until the started ones have stopped. They are InlineInformers, whose handlers run
// in the informer's own goroutine: a pipeline (the service, or each of a host's embedded clusters) keeps two
// goroutines per idle informer instead of a shared informer's nine. No informer resyncs: talos-ccm's controllers
// resync from their own state.
type Informers struct {
	client *Client

	// nodeSelector, when set, is the label selector the Nodes informer lists and watches with.
	nodeSelector string

	mu        sync.Mutex
	informers map[string]*InlineInformer
	started   map[string]bool
	stopping  bool
	running   sync.WaitGroup
}

// NewInformers returns the informers of client; none is made yet.
func NewInformers(client *Client) *Informers {
	return &Informers{client: client, informers: map[string]*InlineInformer{}, started: map[string]bool{}}
}

// NewNodeInformers returns the informers of client whose Nodes informer lists and watches only the Nodes
// that selector (a label selector, as kubectl's -l; empty means every Node) selects; none is made yet. The
// others are those of NewInformers.
func NewNodeInformers(client *Client, selector string) *Informers {
	f := NewInformers(client)
	f.nodeSelector = selector

	return f
}

// For returns the informer named key, made by newInformer on first use.
func (f *Informers) For(key string, newInformer func(*Client) *InlineInformer) *InlineInformer {
	f.mu.Lock()
	defer f.mu.Unlock()

	informer, ok := f.informers[key]
	if !ok {
		informer = newInformer(f.client)
		f.informers[key] = informer
	}

	return informer
}

// Unshared returns a new informer over the client, made by newInformer, that is not one of the set: its
// caller runs it (RunWithContext), and neither Start nor WaitForCacheSync nor Shutdown sees it.
func (f *Informers) Unshared(newInformer func(*Client) *InlineInformer) *InlineInformer {
	return newInformer(f.client)
}

// Nodes returns the informer of every Node (of those the node selector selects, see NewNodeInformers). Its
// Nodes come trimmed from the wire: their metadata without managed fields, their spec, and of their status
// the addresses and the Ready condition (see trimNodeEnvelope).
func (f *Informers) Nodes() *InlineInformer {
	return f.For("nodes", func(c *Client) *InlineInformer {
		var narrow func(*metav1.ListOptions)

		if selector := f.nodeSelector; selector != "" {
			narrow = func(opts *metav1.ListOptions) { opts.LabelSelector = selector }
		}

		return NewInformer(c.Nodes(), &corev1.Node{}, narrow, nil)
	})
}

// NodeLister reads the Nodes informer's cache.
func (f *Informers) NodeLister() corelisters.NodeLister { //nolint:ireturn
	return corelisters.NewNodeLister(f.Nodes().GetIndexer())
}

// CertificateSigningRequests returns the informer of every CertificateSigningRequest.
func (f *Informers) CertificateSigningRequests() *InlineInformer {
	return f.For("certificatesigningrequests", func(c *Client) *InlineInformer {
		return NewInformer(c.CertificateSigningRequests(), &certificatesv1.CertificateSigningRequest{}, nil, nil)
	})
}

// CertificateSigningRequestLister reads the CertificateSigningRequests informer's cache.
func (f *Informers) CertificateSigningRequestLister() certlisters.CertificateSigningRequestLister { //nolint:ireturn
	return certlisters.NewCertificateSigningRequestLister(f.CertificateSigningRequests().GetIndexer())
}

// Services returns the informer of the Services of every namespace.
func (f *Informers) Services() *InlineInformer {
	return f.For("services", func(c *Client) *InlineInformer {
		// The lister's Services(namespace) reads through the namespace index.
		return NewInformer(c.Services(metav1.NamespaceAll), &corev1.Service{}, nil,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	})
}

// ServiceLister reads the Services informer's cache.
func (f *Informers) ServiceLister() corelisters.ServiceLister { //nolint:ireturn
	return corelisters.NewServiceLister(f.Services().GetIndexer())
}

// Namespaces returns the informer of every Namespace.
func (f *Informers) Namespaces() *InlineInformer {
	return f.For("namespaces", func(c *Client) *InlineInformer {
		return NewInformer(c.Namespaces(), &corev1.Namespace{}, nil, nil)
	})
}

// Start starts the informers not started yet, until ctx ends; after Shutdown it starts nothing.
func (f *Informers) Start(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()

	if f.stopping {
		return
	}

	for key, informer := range f.informers {
		if !f.started[key] {
			f.started[key] = true

			f.running.Go(func() { informer.RunWithContext(ctx) })
		}
	}
}

// WaitForCacheSync waits until every started informer has synced, and reports whether they have (false when
// ctx ends first).
func (f *Informers) WaitForCacheSync(ctx context.Context) bool {
	f.mu.Lock()

	informers := make([]*InlineInformer, 0, len(f.started))

	for key := range f.started {
		informers = append(informers, f.informers[key])
	}

	f.mu.Unlock()

	for _, informer := range informers {
		select {
		case <-informer.synced:
		case <-ctx.Done():
			// Done may win over an informer that has synced as well.
			if !informer.HasSynced() {
				return false
			}
		}
	}

	return true
}

// Shutdown waits until the started informers have stopped (their context ended), and keeps any other from
// starting.
func (f *Informers) Shutdown() {
	f.mu.Lock()
	f.stopping = true
	f.mu.Unlock()

	f.running.Wait()
}

// ListWatcher lists and watches one resource: a typed client with lists (Client.Nodes, for one).
type ListWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// NewInformer returns an informer of the objects of client (example is one of them) that tweak, if set,
// narrows (with a field selector, say), indexed by indexers (nil for none), which never resyncs.
func NewInformer[L runtime.Object](client ListWatcher[L], example runtime.Object, tweak func(*metav1.ListOptions), indexers cache.Indexers) *InlineInformer {
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}

	return newInlineInformer(clientSource[L]{client: client, tweak: tweak}, example, indexers)
}
