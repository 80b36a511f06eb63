package ccm

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// pipelineRuns follows the runs of a pipeline controller for the handle that Register returned with a
// namespace prefix: the host runtime builds a new pipeline at every run, and the handle reads the current
// one.
type pipelineRuns struct {
	mu sync.Mutex
	// current is the pipeline of the run in progress; nil between runs.
	current *CCM
	// ready is closed once the current run's informers have synced; a run that ends replaces it.
	ready chan struct{}
}

func newPipelineRuns() *pipelineRuns {
	return &pipelineRuns{ready: make(chan struct{})}
}

// start records the pipeline of a run whose informers have started.
func (p *pipelineRuns) start(c *CCM) {
	p.mu.Lock()
	defer p.mu.Unlock()

	p.current = c
}

// synced records that the current run's informers have synced.
func (p *pipelineRuns) synced() {
	p.mu.Lock()
	defer p.mu.Unlock()

	close(p.ready)
}

// stop records the end of the current run: its informers are about to stop.
func (p *pipelineRuns) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()

	p.current = nil

	select {
	case <-p.ready:
		p.ready = make(chan struct{})
	default:
	}
}

// waitForCacheSync waits until a run's informers have synced, and reports whether they have (false when
// ctx ends first).
func (p *pipelineRuns) waitForCacheSync(ctx context.Context) bool {
	p.mu.Lock()
	ready := p.ready
	p.mu.Unlock()

	select {
	case <-ready:
		return true
	case <-ctx.Done():
		return false
	}
}

// pipeline returns the pipeline of the current run, or nil between runs.
func (p *pipelineRuns) pipeline() *CCM {
	p.mu.Lock()
	defer p.mu.Unlock()

	return p.current
}

// nodeLister returns the Node lister of the current run, or nil between runs.
func (p *pipelineRuns) nodeLister() corelisters.NodeLister { //nolint:ireturn
	if current := p.pipeline(); current != nil {
		return current.NodeLister()
	}

	return nil
}

// runsNodeLister reads the Nodes of the informer cache of the current run: none between runs.
type runsNodeLister struct {
	runs *pipelineRuns
}

// List implements corelisters.NodeLister.
func (l runsNodeLister) List(selector labels.Selector) ([]*corev1.Node, error) {
	lister := l.runs.nodeLister()
	if lister == nil {
		return nil, nil
	}

	return lister.List(selector) //nolint:wrapcheck // The informer cache's own error.
}

// Get implements corelisters.NodeLister.
func (l runsNodeLister) Get(name string) (*corev1.Node, error) {
	lister := l.runs.nodeLister()
	if lister == nil {
		return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
	}

	return lister.Get(name) //nolint:wrapcheck // The informer cache's own error, NotFound included.
}
