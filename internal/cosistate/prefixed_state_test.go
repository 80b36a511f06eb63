package cosistate_test

import (
	"context"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/conformance"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"
	"go.uber.org/goleak"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

const (
	alphaPrefix = "alpha:"
	betaPrefix  = "beta:"
)

// newHostState returns a host state and the prefixed views of alpha and beta over it.
func newHostState(t *testing.T) (host, alpha, beta state.State) {
	t.Helper()

	host = state.WrapCore(namespaced.NewState(inmem.Build))

	alpha, err := cosistate.NewPrefixedState(host, alphaPrefix)
	require.NoError(t, err)

	beta, err = cosistate.NewPrefixedState(host, betaPrefix)
	require.NoError(t, err)

	return host, alpha, beta
}

// TestPrefixedStateConformance runs the COSI state conformance suite on two prefixed views of one host
// state at once: each suite expects to see exactly what it wrote, in the same namespaces and with the same
// IDs as the other, so any leak between the prefixes fails it.
func TestPrefixedStateConformance(t *testing.T) {
	t.Parallel()

	_, alpha, beta := newHostState(t)

	for name, view := range map[string]state.State{"alpha": alpha, "beta": beta} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()

			suite.Run(t, &prefixedSuite{StateSuite: conformance.StateSuite{
				State:      view,
				Namespaces: []resource.Namespace{talos.NamespaceName, node.NamespaceName, kube.NamespaceName},
			}})
		})
	}
}

// prefixedSuite is the conformance suite with its one test that writes to the namespace "default", which a
// view refuses, replaced by the same check in a namespace of the view.
type prefixedSuite struct {
	conformance.StateSuite
}

// TestParallelDestroy: of concurrent destroys of one resource, one succeeds and the others find nothing.
func (s *prefixedSuite) TestParallelDestroy() {
	ctx := s.T().Context()
	r := conformance.NewPathResource(node.NamespaceName, "parallel/destroy")

	s.Require().NoError(s.State.Create(ctx, r))

	errs := make(chan error, 10)

	for range cap(errs) {
		go func() { errs <- s.State.Destroy(ctx, r.Metadata()) }()
	}

	destroyed := 0

	for range cap(errs) {
		err := <-errs
		if err == nil {
			destroyed++

			continue
		}

		s.True(state.IsNotFoundError(err), "%v", err)
	}

	s.Equal(1, destroyed)
}

// TestPrefixedStateStoresUnderPrefix: what the view writes, the host stores under the prefix with the same
// metadata and spec, and what the host writes under the prefix, the view reads in talos-ccm's namespace.
func TestPrefixedStateStoresUnderPrefix(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	host, alpha, _ := newHostState(t)

	pm := talos.NewPlatformMetadata(talos.NamespaceName, "worker-1")
	pm.TypedSpec().Value = &specs.PlatformMetadataSpec{Platform: "aws", Region: "eu-west-1"}
	pm.Metadata().Labels().Set("role", "worker")
	pm.Metadata().Annotations().Set("note", "from the view")
	pm.Metadata().Finalizers().Add("host.Keeper")

	require.NoError(t, alpha.Create(ctx, pm, state.WithCreateOwner("talos.Source")))

	// The caller's resource has what the state set, in the view's namespace.
	assert.Equal(t, talos.NamespaceName, pm.Metadata().Namespace())
	assert.Equal(t, "talos.Source", pm.Metadata().Owner())
	assert.Equal(t, "1", pm.Metadata().Version().String())

	stored, err := safe.StateGet[*talos.PlatformMetadata](ctx, host, talos.NewPlatformMetadata(cosistate.HostNamespace(alphaPrefix, talos.NamespaceName), "worker-1").Metadata())
	require.NoError(t, err)
	assert.Equal(t, "alpha:talos", stored.Metadata().Namespace())
	assertSameResource(t, pm, stored)

	// The host's own write under the prefix reads back in the view's namespace, metadata and all.
	ma := talos.NewMachineAddresses(cosistate.HostNamespace(alphaPrefix, talos.NamespaceName), "worker-1")
	ma.TypedSpec().Value = &specs.MachineAddressesSpec{NodeIp: "10.0.0.1"}
	ma.Metadata().Labels().Set("source", "host")
	require.NoError(t, host.Create(ctx, ma, state.WithCreateOwner("host.FactsController")))

	_, err = host.Teardown(ctx, ma.Metadata(), state.WithTeardownOwner("host.FactsController"))
	require.NoError(t, err)

	stored2, err := safe.StateGet[*talos.MachineAddresses](ctx, host, ma.Metadata())
	require.NoError(t, err)

	viewed, err := safe.StateGet[*talos.MachineAddresses](ctx, alpha, talos.NewMachineAddresses(talos.NamespaceName, "worker-1").Metadata())
	require.NoError(t, err)
	assert.Equal(t, talos.NamespaceName, viewed.Metadata().Namespace())
	assert.Equal(t, resource.PhaseTearingDown, viewed.Metadata().Phase())
	assertSameResource(t, stored2, viewed)

	list, err := safe.StateListAll[*talos.MachineAddresses](ctx, alpha)
	require.NoError(t, err)
	require.Equal(t, 1, list.Len())
	assertSameResource(t, stored2, list.Get(0))

	// Reading through the view returns a copy: changing it changes nothing in the host.
	viewed.Metadata().Labels().Set("source", "changed")
	viewed.TypedSpec().Value.NodeIp = "10.9.9.9"

	again, err := safe.StateGet[*talos.MachineAddresses](ctx, host, ma.Metadata())
	require.NoError(t, err)
	assertSameResource(t, stored2, again)
}

// assertSameResource checks that two resources are equal but for their namespaces.
func assertSameResource(t *testing.T, want, got resource.Resource) {
	t.Helper()

	w, g := want.Metadata(), got.Metadata()

	assert.Equal(t, w.Type(), g.Type())
	assert.Equal(t, w.ID(), g.ID())
	assert.Equal(t, w.Version().String(), g.Version().String())
	assert.Equal(t, w.Owner(), g.Owner())
	assert.Equal(t, w.Phase(), g.Phase())
	assert.True(t, w.Labels().Equal(*g.Labels()), "labels %v, want %v", g.Labels().Raw(), w.Labels().Raw())
	assert.True(t, w.Annotations().Equal(*g.Annotations()), "annotations %v, want %v", g.Annotations().Raw(), w.Annotations().Raw())
	assert.ElementsMatch(t, *w.Finalizers(), *g.Finalizers())
	assert.True(t, w.Created().Equal(g.Created()), "created %s, want %s", g.Created(), w.Created())
	assert.True(t, w.Updated().Equal(g.Updated()), "updated %s, want %s", g.Updated(), w.Updated())
	assert.Equal(t, want.Spec(), got.Spec())
}

// TestPrefixedStateRefusesOtherNamespaces: a view reaches neither the host's namespaces nor another
// prefix's, for any call, and the host's resources stay as they were.
func TestPrefixedStateRefusesOtherNamespaces(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	host, alpha, beta := newHostState(t)

	// beta's fact, and a resource of the host in a namespace of its own.
	require.NoError(t, beta.Create(ctx, talos.NewPlatformMetadata(talos.NamespaceName, "worker-1")))
	require.NoError(t, host.Create(ctx, talos.NewPlatformMetadata("inventory", "worker-1")))

	for _, ns := range []resource.Namespace{
		"inventory",
		cosistate.HostNamespace(betaPrefix, talos.NamespaceName),
		cosistate.HostNamespace(alphaPrefix, talos.NamespaceName), // already prefixed: not a namespace of the view
		"",
		"default",
	} {
		t.Run(ns, func(t *testing.T) {
			t.Parallel()

			ptr := talos.NewPlatformMetadata(ns, "worker-1")

			calls := map[string]func() error{
				"get": func() error {
					_, err := alpha.Get(ctx, ptr.Metadata())

					return err
				},
				"list": func() error {
					_, err := alpha.List(ctx, ptr.Metadata())

					return err
				},
				"create":  func() error { return alpha.Create(ctx, talos.NewPlatformMetadata(ns, "worker-2")) },
				"update":  func() error { return alpha.Update(ctx, ptr) },
				"destroy": func() error { return alpha.Destroy(ctx, ptr.Metadata()) },
				"watch":   func() error { return alpha.Watch(ctx, ptr.Metadata(), make(chan state.Event)) },
				"watch kind": func() error {
					return alpha.WatchKind(ctx, ptr.Metadata(), make(chan state.Event), state.WithBootstrapContents(true))
				},
				"watch kind aggregated": func() error {
					return alpha.WatchKindAggregated(ctx, ptr.Metadata(), make(chan []state.Event), state.WithBootstrapContents(true))
				},
				"modify": func() error {
					return alpha.Modify(ctx, talos.NewPlatformMetadata(ns, "worker-1"), func(resource.Resource) error { return nil })
				},
			}

			for name, call := range calls {
				err := call()
				require.Error(t, err, name)
				assert.ErrorIs(t, err, cosistate.ErrNamespaceOutsideView, name)
				assert.False(t, state.IsNotFoundError(err), "%s: a refusal is not a not found", name)
				assert.ErrorContains(t, err, "is not one of talos-ccm's", name)
			}
		})
	}

	t.Cleanup(func() {
		// Nothing was written outside of the view: the host's and beta's resources are unchanged, and
		// worker-2 exists nowhere.
		for _, ns := range []resource.Namespace{"inventory", "beta:talos"} {
			r, err := host.Get(context.Background(), talos.NewPlatformMetadata(ns, "worker-1").Metadata())
			require.NoError(t, err)
			assert.Equal(t, "1", r.Metadata().Version().String())

			_, err = host.Get(context.Background(), talos.NewPlatformMetadata(ns, "worker-2").Metadata())
			assert.True(t, state.IsNotFoundError(err))
		}
	})
}

// TestPrefixedStateErrors: the host state's errors keep their kind through the view, and a conflict names
// its resource in the view's namespace.
func TestPrefixedStateErrors(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	_, alpha, _ := newHostState(t)

	const owner = "node.NodeTransformController"

	nt := node.NewNodeTransform(node.NamespaceName, "worker-1")
	nt.Metadata().Finalizers().Add("k8ssink.NodeSinkController")
	require.NoError(t, alpha.Create(ctx, nt, state.WithCreateOwner(owner)))

	stale := nt.DeepCopy()
	nt.TypedSpec().Value = &specs.NodeTransformSpec{ProviderId: "aws:///a/b"}
	require.NoError(t, alpha.Update(ctx, nt, state.WithUpdateOwner(owner)))

	for _, tt := range []struct {
		name      string
		call      func() error
		notFound  bool
		conflict  bool
		owner     bool
		phase     bool
		namespace resource.Namespace // the namespace the conflict names, if it names one
	}{
		{
			name: "get missing",
			call: func() error {
				_, err := alpha.Get(ctx, node.NewNodeTransform(node.NamespaceName, "worker-9").Metadata())
				return err
			},
			notFound: true,
		},
		{
			name: "destroy missing",
			call: func() error {
				return alpha.Destroy(ctx, node.NewNodeTransform(node.NamespaceName, "worker-9").Metadata(), state.WithDestroyOwner(owner))
			},
			notFound: true,
		},
		{
			name: "update missing",
			call: func() error {
				return alpha.Update(ctx, node.NewNodeTransform(node.NamespaceName, "worker-9"), state.WithUpdateOwner(owner))
			},
			notFound: true,
		},
		{
			name: "create existing",
			call: func() error {
				return alpha.Create(ctx, node.NewNodeTransform(node.NamespaceName, "worker-1"), state.WithCreateOwner(owner))
			},
			conflict:  true,
			namespace: node.NamespaceName,
		},
		{
			name:     "update stale version",
			call:     func() error { return alpha.Update(ctx, stale, state.WithUpdateOwner(owner)) },
			conflict: true,
		},
		{
			name:      "update by another owner",
			call:      func() error { return alpha.Update(ctx, nt.DeepCopy(), state.WithUpdateOwner("someone.Else")) },
			conflict:  true,
			owner:     true,
			namespace: node.NamespaceName,
		},
		{
			name:      "destroy by another owner",
			call:      func() error { return alpha.Destroy(ctx, nt.Metadata(), state.WithDestroyOwner("someone.Else")) },
			conflict:  true,
			owner:     true,
			namespace: node.NamespaceName,
		},
		{
			name: "update in another phase",
			call: func() error {
				return alpha.Update(ctx, nt.DeepCopy(), state.WithUpdateOwner(owner), state.WithExpectedPhase(resource.PhaseTearingDown))
			},
			conflict:  true,
			phase:     true,
			namespace: node.NamespaceName,
		},
		{
			name:      "destroy with finalizers",
			call:      func() error { return alpha.Destroy(ctx, nt.Metadata(), state.WithDestroyOwner(owner)) },
			conflict:  true,
			namespace: node.NamespaceName,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			require.Error(t, err)

			assert.Equal(t, tt.notFound, state.IsNotFoundError(err), "not found: %v", err)
			assert.Equal(t, tt.conflict, state.IsConflictError(err), "conflict: %v", err)
			assert.Equal(t, tt.owner, state.IsOwnerConflictError(err), "owner conflict: %v", err)
			assert.Equal(t, tt.phase, state.IsPhaseConflictError(err), "phase conflict: %v", err)
			assert.NotErrorIs(t, err, cosistate.ErrNamespaceOutsideView)
			assert.Contains(t, err.Error(), "alpha:node", "the message names the namespace as the host stores it")

			if tt.namespace != "" {
				assert.True(t, state.IsConflictError(err, state.WithResourceNamespace(tt.namespace), state.WithResourceType(node.NodeTransformType)))
				assert.False(t, state.IsConflictError(err, state.WithResourceNamespace("alpha:node")))
			}
		})
	}
}

// TestPrefixedStateFinalizersAndTeardown: finalizers, teardown and destroy through the view, as the
// runtime's controllers use them, with owners enforced by the host's state.
func TestPrefixedStateFinalizersAndTeardown(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	host, alpha, _ := newHostState(t)

	const owner = "kube.KubeNodeController"

	require.NoError(t, alpha.Create(ctx, kube.NewKubeNode(kube.NamespaceName, "worker-1"), state.WithCreateOwner(owner)))

	ptr := kube.NewKubeNode(kube.NamespaceName, "worker-1").Metadata()
	hostPtr := resource.NewMetadata(cosistate.HostNamespace(alphaPrefix, kube.NamespaceName), kube.KubeNodeType, "worker-1", resource.VersionUndefined)

	require.NoError(t, alpha.AddFinalizer(ctx, ptr, "node.NodeTransformController"))

	teardownCtx, err := alpha.ContextWithTeardown(ctx, ptr)
	require.NoError(t, err)

	// Teardown by another owner is refused by the host's state.
	_, err = alpha.Teardown(ctx, ptr, state.WithTeardownOwner("someone.Else"))
	require.Error(t, err)
	assert.True(t, state.IsOwnerConflictError(err))

	ready, err := alpha.Teardown(ctx, ptr, state.WithTeardownOwner(owner))
	require.NoError(t, err)
	assert.False(t, ready, "a finalizer is pending")

	select {
	case <-teardownCtx.Done():
	case <-ctx.Done():
		t.Fatal("the teardown context was not canceled")
	}

	stored, err := host.Get(ctx, hostPtr)
	require.NoError(t, err)
	assert.Equal(t, resource.PhaseTearingDown, stored.Metadata().Phase())
	assert.True(t, stored.Metadata().Finalizers().Has("node.NodeTransformController"))

	destroyed := make(chan error, 1)

	go func() { destroyed <- alpha.TeardownAndDestroy(ctx, ptr, state.WithTeardownAndDestroyOwner(owner)) }()

	require.NoError(t, alpha.RemoveFinalizer(ctx, ptr, "node.NodeTransformController"))
	require.NoError(t, <-destroyed)

	_, err = host.Get(ctx, hostPtr)
	assert.True(t, state.IsNotFoundError(err))
}

// TestPrefixedStateWatch: watches bootstrap with the resources already there and report changes (with the
// old resource) in the view's namespace, with the label queries and tail events of the caller; nothing of
// another prefix shows up.
//
// Not parallel: goleak sees the goroutines of the whole process, and checks here that the view's forwarders
// stop with their watches.
func TestPrefixedStateWatch(t *testing.T) { //nolint:paralleltest
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	host, alpha, beta := newHostState(t)

	hostNs := cosistate.HostNamespace(alphaPrefix, talos.NamespaceName)

	for _, id := range []string{"worker-1", "worker-2"} {
		pm := talos.NewPlatformMetadata(hostNs, id)
		pm.Metadata().Labels().Set("pool", id)
		require.NoError(t, host.Create(ctx, pm))
		require.NoError(t, beta.Create(ctx, talos.NewPlatformMetadata(talos.NamespaceName, id)))
	}

	kind := talos.NewPlatformMetadata(talos.NamespaceName, "").Metadata()

	events := make(chan state.Event)
	require.NoError(t, alpha.WatchKind(ctx, kind, events, state.WithBootstrapContents(true),
		state.WatchWithLabelQuery(resource.LabelEqual("pool", "worker-2"))))

	aggregated := make(chan []state.Event)
	require.NoError(t, alpha.WatchKindAggregated(ctx, kind, aggregated, state.WithBootstrapContents(true)))

	single := make(chan state.Event)
	require.NoError(t, alpha.Watch(ctx, talos.NewPlatformMetadata(talos.NamespaceName, "worker-1").Metadata(), single))

	next := func(ch <-chan state.Event) state.Event {
		t.Helper()

		select {
		case e := <-ch:
			return e
		case <-ctx.Done():
			t.Fatal("no event")

			return state.Event{}
		}
	}

	// The label query passes through: only worker-2 is bootstrapped.
	e := next(events)
	require.Equal(t, state.Created, e.Type, "%v", e.Error)
	assert.Equal(t, talos.NamespaceName, e.Resource.Metadata().Namespace())
	assert.Equal(t, "worker-2", e.Resource.Metadata().ID())
	assert.Equal(t, state.Bootstrapped, next(events).Type)

	var bootstrap []state.Event

	for len(bootstrap) < 3 {
		select {
		case batch := <-aggregated:
			bootstrap = append(bootstrap, batch...)
		case <-ctx.Done():
			t.Fatal("no aggregated bootstrap")
		}
	}

	assert.Equal(t, []state.EventType{state.Created, state.Created, state.Bootstrapped},
		[]state.EventType{bootstrap[0].Type, bootstrap[1].Type, bootstrap[2].Type})

	for _, e := range bootstrap[:2] {
		assert.Equal(t, talos.NamespaceName, e.Resource.Metadata().Namespace())
	}

	e = next(single)
	require.Equal(t, state.Created, e.Type)
	assert.Equal(t, talos.NamespaceName, e.Resource.Metadata().Namespace())

	// A change in beta is not seen; a change in alpha's namespace, written by the host, is, with the old
	// resource.
	_, err := beta.ModifyWithResult(ctx, talos.NewPlatformMetadata(talos.NamespaceName, "worker-2"), func(r resource.Resource) error {
		r.Metadata().Labels().Set("pool", "worker-2")

		return nil
	})
	require.NoError(t, err)

	_, err = host.UpdateWithConflicts(ctx, talos.NewPlatformMetadata(hostNs, "worker-2").Metadata(), func(r resource.Resource) error {
		r.Metadata().Annotations().Set("changed", "yes")

		return nil
	})
	require.NoError(t, err)

	e = next(events)
	require.Equal(t, state.Updated, e.Type)
	assert.Equal(t, talos.NamespaceName, e.Resource.Metadata().Namespace())
	assert.Equal(t, talos.NamespaceName, e.Old.Metadata().Namespace())
	assert.Equal(t, "1", e.Old.Metadata().Version().String())
	assert.Equal(t, "2", e.Resource.Metadata().Version().String())

	require.NoError(t, host.Destroy(ctx, talos.NewPlatformMetadata(hostNs, "worker-1").Metadata()))

	e = next(single)
	require.Equal(t, state.Destroyed, e.Type)
	assert.Equal(t, talos.NamespaceName, e.Resource.Metadata().Namespace())

	// Tail events pass through too: a new watch replays the last change.
	tail := make(chan state.Event)
	require.NoError(t, alpha.WatchKind(ctx, kind, tail, state.WithKindTailEvents(1)))

	e = next(tail)
	require.Equal(t, state.Destroyed, e.Type)
	assert.Equal(t, talos.NamespaceName, e.Resource.Metadata().Namespace())
	assert.Equal(t, "worker-1", e.Resource.Metadata().ID())

	// Every watch stops with its context (goleak checks the forwarders).
	cancel()
}

// TestNewPrefixedStateArguments: a view needs a host state and a valid, non-empty prefix.
func TestNewPrefixedStateArguments(t *testing.T) {
	t.Parallel()

	host := state.WrapCore(namespaced.NewState(inmem.Build))

	for _, tt := range []struct {
		name   string
		host   state.CoreState
		prefix string
		want   string
	}{
		{name: "no host", prefix: "alpha:", want: "no host state"},
		{name: "empty prefix", host: host, want: "empty prefix"},
		{name: "no separator", host: host, prefix: "alpha", want: "invalid namespace prefix"},
		{name: "upper case", host: host, prefix: "Alpha:", want: "invalid namespace prefix"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			_, err := cosistate.NewPrefixedState(tt.host, tt.prefix)
			require.Error(t, err)
			assert.ErrorContains(t, err, tt.want)
		})
	}

	view, err := cosistate.NewPrefixedState(host, "alpha:")
	require.NoError(t, err)
	assert.NotNil(t, view)
}
