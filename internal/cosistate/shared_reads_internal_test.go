package cosistate

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// TestSharedReadsHandOutTheStoredResource: reads of the in-memory state share what it stores (the same
// object every time, no copy), see every write at once, and what was handed out before a write is not
// changed by it.
func TestSharedReadsHandOutTheStoredResource(t *testing.T) {
	ctx := t.Context()
	st, ptr := sharedNodes(t, 3, "n001")

	first, err := st.Get(ctx, ptr)
	require.NoError(t, err)

	again, err := st.Get(ctx, ptr)
	require.NoError(t, err)

	assert.Same(t, first, again, "a read is the stored resource, not a copy")

	list, err := st.List(ctx, ptr)
	require.NoError(t, err)
	require.Len(t, list.Items, 3)
	assert.Same(t, first, list.Items[1], "a list holds the stored resources")

	_, err = safe.StateUpdateWithConflicts(ctx, st, kube.NewKubeNode(kube.NamespaceName, "n001").Metadata(), func(n *kube.KubeNode) error {
		n.TypedSpec().Value.ProviderId = "talos://one"

		return nil
	})
	require.NoError(t, err)

	updated, err := safe.StateGet[*kube.KubeNode](ctx, st, ptr)
	require.NoError(t, err)
	assert.Equal(t, "talos://one", updated.TypedSpec().Value.GetProviderId(), "a read sees the write at once")
	assert.Equal(t, "2", updated.Metadata().Version().String())

	old, ok := first.(*kube.KubeNode)
	require.True(t, ok)
	assert.Empty(t, old.TypedSpec().Value.GetProviderId(), "what was handed out before the write is unchanged")
	assert.Equal(t, "1", old.Metadata().Version().String())

	require.NoError(t, st.Destroy(ctx, ptr))

	_, err = st.Get(ctx, ptr)
	assert.True(t, state.IsNotFoundError(err), "a destroyed resource is not found: %v", err)

	assert.Equal(t, map[resource.ID]string{"n000": "1", "n002": "1"}, contents(ctx, t, st))
}

// sharedNodes is a state of MemoryStateBuilder's namespaces with nodes KubeNodes, read once, and the node
// id.
func sharedNodes(t *testing.T, nodes int, id resource.ID) (state.State, resource.Pointer) {
	t.Helper()

	st := state.WrapCore(namespaced.NewState(MemoryStateBuilder()))
	createNodes(t.Context(), t, st, 0, nodes)

	ptr := kube.NewKubeNode(kube.NamespaceName, id).Metadata()

	_, err := st.Get(t.Context(), ptr)
	require.NoError(t, err)

	return st, ptr
}

// TestSharedReadsListAsTheMemoryStateDoes: a list is filtered by ID and label queries and sorted by ID, as
// the COSI runtime's in-memory state's list is.
func TestSharedReadsListAsTheMemoryStateDoes(t *testing.T) {
	ctx := t.Context()
	shared := state.WrapCore(namespaced.NewState(MemoryStateBuilder()))
	plain := state.WrapCore(namespaced.NewState(inmem.Build))

	for _, st := range []state.State{shared, plain} {
		for _, name := range []string{"csr-9", "csr-1", "other-5", "csr-3"} {
			r := kube.NewKubeCSR(kube.NamespaceName, name)
			r.TypedSpec().Value = &specs.KubeCSRSpec{Username: "system:node:" + name[len(name)-1:]}
			kube.LabelRequester(r)

			require.NoError(t, st.Create(ctx, r))
		}
	}

	kind := kube.NewKubeCSR(kube.NamespaceName, "").Metadata()

	_, err := shared.Get(ctx, kube.NewKubeCSR(kube.NamespaceName, "none").Metadata())
	require.True(t, state.IsNotFoundError(err))

	for _, opts := range [][]state.ListOption{
		nil,
		{state.WithIDQuery(resource.IDRegexpMatch(regexp.MustCompile("^csr-")))},
		{state.WithLabelQuery(resource.LabelEqual(kube.RequesterLabel, kube.RequesterLabelValue("system:node:3")))},
	} {
		want, err := plain.List(ctx, kind, opts...)
		require.NoError(t, err)

		got, err := shared.List(ctx, kind, opts...)
		require.NoError(t, err)

		assert.Equal(t, ids(want), ids(got))
		assert.NotEmpty(t, ids(got))
	}
}

// TestSharedReadsWithTheHostsStore: what the host's backing store loads is read as stored, and a write the
// host's store refuses changes nothing that is read.
func TestSharedReadsWithTheHostsStore(t *testing.T) {
	ctx := t.Context()

	loaded := kube.NewKubeNode(kube.NamespaceName, "loaded")
	loaded.Metadata().SetVersion(resource.VersionUndefined.Next())

	host := &fakeStore{loads: []resource.Resource{loaded}}
	st := state.WrapCore(namespaced.NewState(MemoryStateBuilder(inmem.WithBackingStore(host))))

	got, err := st.Get(ctx, loaded.Metadata())
	require.NoError(t, err)
	assert.Equal(t, "loaded", got.Metadata().ID())

	again, err := st.Get(ctx, loaded.Metadata())
	require.NoError(t, err)
	assert.Same(t, host.stored(), again, "the loaded resource is read as the memory state stores it")

	host.fail(errors.New("disk full"))

	_, err = safe.StateUpdateWithConflicts(ctx, st, loaded.Metadata(), func(n *kube.KubeNode) error {
		n.TypedSpec().Value.ProviderId = "talos://refused"

		return nil
	})
	require.ErrorContains(t, err, "disk full")

	after, err := safe.StateGet[*kube.KubeNode](ctx, st, loaded.Metadata())
	require.NoError(t, err)
	assert.Empty(t, after.TypedSpec().Value.GetProviderId(), "a refused write is not read")

	host.fail(nil)
	createNodes(ctx, t, st, 0, 1)

	assert.Equal(t, map[resource.ID]string{"loaded": "1", "n000": "1"}, contents(ctx, t, st))
	assert.Equal(t, 1, host.puts(), "the host's store took the write it did not refuse")
}

// fakeStore is a host's backing store that loads what it is given and refuses writes while told to.
type fakeStore struct {
	mu     sync.Mutex
	loads  []resource.Resource
	loaded resource.Resource
	err    error
	put    int
}

func (f *fakeStore) Load(_ context.Context, handler inmem.LoadHandler) error {
	for _, res := range f.loads {
		f.mu.Lock()
		f.loaded = res
		f.mu.Unlock()

		if err := handler(res.Metadata().Type(), res); err != nil {
			return err
		}
	}

	return nil
}

func (f *fakeStore) Put(context.Context, resource.Type, resource.Resource) error {
	f.mu.Lock()
	defer f.mu.Unlock()

	if f.err != nil {
		return f.err
	}

	f.put++

	return nil
}

func (f *fakeStore) Destroy(context.Context, resource.Type, resource.Pointer) error { return nil }

func (f *fakeStore) fail(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *fakeStore) stored() resource.Resource {
	f.mu.Lock()
	defer f.mu.Unlock()

	return f.loaded
}

func (f *fakeStore) puts() int {
	f.mu.Lock()
	defer f.mu.Unlock()

	return f.put
}

func ids(list resource.List) []string {
	out := make([]string, 0, len(list.Items))
	for _, r := range list.Items {
		out = append(out, fmt.Sprintf("%s@%s", r.Metadata().ID(), r.Metadata().Version()))
	}

	return out
}

// TestSharedReadsCheckCatchesAChangedRead: with the tests' check on, a reader that changed what it read is
// caught at the next write of that resource (which ends the process, here recorded instead).
func TestSharedReadsCheckCatchesAChangedRead(t *testing.T) {
	check, report := checkSharedReads, sharedReadChanged
	checkSharedReads = true

	var changed []string

	sharedReadChanged = func(msg string) { changed = append(changed, msg) }

	t.Cleanup(func() { checkSharedReads, sharedReadChanged = check, report })

	ctx := t.Context()
	st, ptr := sharedNodes(t, 1, "n000")

	write := func() {
		_, err := safe.StateUpdateWithConflicts(ctx, st, ptr, func(n *kube.KubeNode) error {
			n.TypedSpec().Value.Uid += "+"

			return nil
		})
		assert.NoError(t, err)
	}

	write()
	assert.Empty(t, changed, "a reader that changed nothing")

	read, err := safe.StateGet[*kube.KubeNode](ctx, st, ptr)
	require.NoError(t, err)

	read.TypedSpec().Value.ProviderId = "talos://changed-in-place"

	write()
	assert.Equal(t,
		[]string{"KubeNodes.kube.tccm.dev(kube/n000) was changed after the in-memory state stored it: something changed a resource it read"},
		changed)
}
