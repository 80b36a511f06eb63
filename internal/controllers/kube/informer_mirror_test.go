package kube_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/controllers/kube"
	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
	kuberes "github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// service is a Service of the given type.
func service(namespace, name string, typ corev1.ServiceType) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.ServiceSpec{Type: typ},
	}
}

// watching returns a wait for the first watch of resource on client. The fake clientset keeps no history:
// an object changed after an informer's list but before its watch is registered never reaches the informer,
// so a test changes objects only once the watch is there. The returned function fails the test if no watch
// starts within ten seconds.
func watching(t *testing.T, client *fake.Clientset, resource string) func() {
	t.Helper()

	started := make(chan struct{})
	once := sync.OnceFunc(func() { close(started) })

	client.PrependWatchReactor(resource, func(action clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if w, ok := action.(clienttesting.WatchActionImpl); ok {
			opts = w.ListOptions
		}

		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err == nil {
			once()
		}

		return true, w, err
	})

	return func() {
		t.Helper()

		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatalf("no watch of %s started", resource)
		}
	}
}

// startFactory starts the informers of factory until the test ends and waits for the watch of resource on
// client. Called after the suite starts, the informers stop before the runtime (cleanups run last-in
// first-out), and Shutdown waits for them.
func startFactory(t *testing.T, client *fake.Clientset, resource string, factory informers.SharedInformerFactory) {
	t.Helper()

	watched := watching(t, client, resource)
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})

	watched()
}

// startInline runs informer, through kubeclient.Informers as a pipeline does, until the test ends. Called
// after the suite starts, the informer stops before the runtime (cleanups run last-in first-out).
func startInline(t *testing.T, informer *kubeclient.InlineInformer) {
	t.Helper()

	informers := kubeclient.NewInformers(nil)
	informers.For("services", func(*kubeclient.Client) *kubeclient.InlineInformer { return informer })

	ctx, cancel := context.WithCancel(context.Background())
	informers.Start(ctx)
	t.Cleanup(func() {
		cancel()
		informers.Shutdown()
	})
}

// TestMirrorController runs a mirror (of Services) over a fake clientset: the initial list is mirrored
// and said so, mirrors left from before whose object is gone are destroyed, an object that stops being
// mirrored loses its mirror, and a mirror another controller holds is destroyed only once it is released.
// Its informer is an InlineInformer, as talos-ccm's: the mirror's handler runs in the informer's goroutine.
func TestMirrorController(t *testing.T) {
	client := fake.NewClientset(
		service("prod", "web", corev1.ServiceTypeLoadBalancer),
		service("prod", "internal", corev1.ServiceTypeClusterIP),
	)

	services := client.CoreV1().Services(metav1.NamespaceAll)

	// The fake clientset says it cannot stream the initial list in a watch (client-go's WatchList).
	informer := kubeclient.NewInlineInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return services.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return services.Watch(ctx, opts)
		},
	}, client), &corev1.Service{}, nil)

	s := ctest.New(t)
	ctrl := &kube.KubeServiceController{Informer: informer}

	assert.Equal(t, "kube.KubeServiceController", ctrl.Name())

	// A mirror left from a previous run, whose Service is gone.
	require.NoError(t, s.State.Create(s.Ctx(), kuberes.NewKubeService(kuberes.NamespaceName, "prod/gone"), state.WithCreateOwner(ctrl.Name())))

	s.Register(ctrl)
	ctx := s.Start()

	watched := watching(t, client, "services")
	startInline(t, informer)
	watched()

	ctest.AssertResource(s, kuberes.ServicesSyncID, func(res *kuberes.KubeSync, a *assert.Assertions) {
		a.True(res.TypedSpec().Value.GetSynced())
		a.EqualValues(2, res.TypedSpec().Value.GetObjects(), "every object of the informer's list")
	})

	ctest.AssertResource(s, "prod/web", func(res *kuberes.KubeService, a *assert.Assertions) {
		a.Equal("web", res.TypedSpec().Value.GetName())
		a.Equal(ctrl.Name(), res.Metadata().Owner())
	})
	ctest.AssertNoResource[*kuberes.KubeService](s, "prod/internal")
	ctest.AssertNoResource[*kuberes.KubeService](s, "prod/gone")

	// A Service that becomes a load balancer is mirrored; one that stops being one loses its mirror.
	_, err := client.CoreV1().Services("prod").Update(ctx, service("prod", "internal", corev1.ServiceTypeLoadBalancer), metav1.UpdateOptions{})
	require.NoError(t, err)

	ctest.AssertResource(s, "prod/internal", func(*kuberes.KubeService, *assert.Assertions) {})

	_, err = client.CoreV1().Services("prod").Update(ctx, service("prod", "internal", corev1.ServiceTypeNodePort), metav1.UpdateOptions{})
	require.NoError(t, err)

	ctest.AssertNoResource[*kuberes.KubeService](s, "prod/internal")

	// A mirror that another controller holds is torn down when its Service is deleted, and destroyed once
	// released.
	const holder = "test.Holder"

	require.NoError(t, s.State.AddFinalizer(ctx, kuberes.NewKubeService(kuberes.NamespaceName, "prod/web").Metadata(), holder))
	require.NoError(t, client.CoreV1().Services("prod").Delete(ctx, "web", metav1.DeleteOptions{}))

	ctest.AssertResource(s, "prod/web", func(res *kuberes.KubeService, a *assert.Assertions) {
		a.Equal(resource.PhaseTearingDown, res.Metadata().Phase())
	})

	require.NoError(t, s.State.RemoveFinalizer(ctx, kuberes.NewKubeService(kuberes.NamespaceName, "prod/web").Metadata(), holder))

	ctest.AssertNoResource[*kuberes.KubeService](s, "prod/web")
}

// TestMirrorControllerFinalizers: mirrors carry the finalizers of their consumers from their creation (and
// after every update); a mirror whose object is deleted waits for each consumer to let go, however many
// releases it takes, and is destroyed after the last.
func TestMirrorControllerFinalizers(t *testing.T) {
	client := fake.NewClientset(service("prod", "web", corev1.ServiceTypeLoadBalancer))
	factory := informers.NewSharedInformerFactory(client, 0)

	consumers := []resource.Finalizer{"test.Transform", "test.Lifecycle"}

	s := ctest.New(t)
	s.Register(&kube.KubeServiceController{Informer: factory.Core().V1().Services().Informer(), Finalizers: consumers})
	ctx := s.Start()

	startFactory(t, client, "services", factory)

	ctest.AssertResource(s, "prod/web", func(res *kuberes.KubeService, a *assert.Assertions) {
		a.ElementsMatch(consumers, *res.Metadata().Finalizers())
		a.EqualValues(1, res.Metadata().Version().Value(), "created with its finalizers, in one write")
	})

	require.NoError(t, client.CoreV1().Services("prod").Delete(ctx, "web", metav1.DeleteOptions{}))

	ctest.AssertResource(s, "prod/web", func(res *kuberes.KubeService, a *assert.Assertions) {
		a.Equal(resource.PhaseTearingDown, res.Metadata().Phase())
	})

	ptr := kuberes.NewKubeService(kuberes.NamespaceName, "prod/web").Metadata()

	require.NoError(t, s.State.RemoveFinalizer(ctx, ptr, consumers[0]))

	// Still held by the other consumer.
	ctest.AssertResource(s, "prod/web", func(res *kuberes.KubeService, a *assert.Assertions) {
		a.Equal([]resource.Finalizer{consumers[1]}, []resource.Finalizer(*res.Metadata().Finalizers()))
	})

	require.NoError(t, s.State.RemoveFinalizer(ctx, ptr, consumers[1]))

	ctest.AssertNoResource[*kuberes.KubeService](s, "prod/web")
}

// TestMirrorControllers pins what the runtime knows of each mirror: names are stored as owners, and the
// inputs and outputs are the edges of the controller graph.
func TestMirrorControllers(t *testing.T) {
	t.Parallel()

	withSync := func(typ resource.Type) []controller.Output {
		return []controller.Output{{Type: typ, Kind: controller.OutputExclusive}, {Type: kuberes.KubeSyncType, Kind: controller.OutputShared}}
	}

	for _, tc := range []struct {
		ctrl    controller.Controller
		name    string
		typ     resource.Type
		outputs []controller.Output
	}{
		{ctrl: &kube.KubeNodeController{}, name: "kube.KubeNodeController", typ: kuberes.KubeNodeType, outputs: withSync(kuberes.KubeNodeType)},
		{ctrl: &kube.KubeServiceController{}, name: "kube.KubeServiceController", typ: kuberes.KubeServiceType, outputs: withSync(kuberes.KubeServiceType)},
		{
			ctrl: &kube.KubeNamespaceController{}, name: "kube.KubeNamespaceController", typ: kuberes.KubeNamespaceType,
			outputs: withSync(kuberes.KubeNamespaceType),
		},
		{
			ctrl: &kube.KubeCSRController{}, name: "kube.KubeCSRController", typ: kuberes.KubeCSRType,
			outputs: []controller.Output{{Type: kuberes.KubeCSRType, Kind: controller.OutputExclusive}},
		},
		{ctrl: &kube.KubeAPIServerController{}, name: "kube.KubeAPIServerController", typ: kuberes.KubeAPIServerType, outputs: withSync(kuberes.KubeAPIServerType)},
	} {
		assert.Equal(t, tc.name, tc.ctrl.Name())
		assert.Equal(t, []controller.Input{{Namespace: kuberes.NamespaceName, Type: tc.typ, Kind: controller.InputDestroyReady}}, tc.ctrl.Inputs(), tc.name)
		assert.Equal(t, tc.outputs, tc.ctrl.Outputs(), tc.name)
	}
}
