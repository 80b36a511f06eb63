package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// testFieldManager is the field manager of the tests' server-side applies.
const testFieldManager = "talos-ccm-deploy-test"

// applier applies rendered objects to the control plane through the dynamic client, finding each
// kind's resource with discovery, as kubectl does.
type applier struct {
	dynamic dynamic.Interface
	mapper  meta.RESTMapper
}

func newApplier(t testing.TB, cfg *rest.Config) *applier {
	t.Helper()

	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)

	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)

	return &applier{
		dynamic: dyn,
		mapper:  restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)),
	}
}

// errNoKind is returned for an object whose kind the apiserver does not serve (a custom resource
// without its definition).
var errNoKind = errors.New("kind not served by the apiserver")

// apply applies obj with server-side apply and strict field validation: for real, or with dryRun as a
// server-side dry run (admission and validation run, nothing is stored).
func (a *applier) apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()

	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return fmt.Errorf("%w: %s", errNoKind, gvk)
	}

	if err != nil {
		return fmt.Errorf("failed to map %s: %w", gvk, err)
	}

	data, err := json.Marshal(obj.Object)
	if err != nil {
		return fmt.Errorf("failed to encode %s %s: %w", gvk.Kind, obj.GetName(), err)
	}

	var resource dynamic.ResourceInterface = a.dynamic.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		resource = a.dynamic.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}

	opts := metav1.PatchOptions{FieldManager: testFieldManager, Force: new(true), FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}

	if _, err = resource.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts); err != nil {
		return fmt.Errorf("failed to apply %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
	}

	return nil
}

// createNamespace creates a namespace for one test and deletes it when the test ends.
func createNamespace(t *testing.T, env *testenv.Env, name string) {
	t.Helper()

	_, err := env.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Cleanup(func() {
		err := env.Clientset().CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("failed to delete namespace %s: %v", name, err)
		}
	})
}

// identityKinds are the objects that make up talos-ccm's Kubernetes identity and rights.
var identityKinds = map[string]bool{
	"ServiceAccount":     true,
	"ClusterRole":        true,
	"ClusterRoleBinding": true,
	"Role":               true,
	"RoleBinding":        true,
}

// applyIdentity applies the chart's ServiceAccount and RBAC objects for real, and deletes the
// cluster-scoped ones when the test ends (the namespace takes the others with it). It returns the
// service account's user name.
func applyIdentity(t *testing.T, env *testenv.Env, objects []*unstructured.Unstructured) string {
	t.Helper()

	a := newApplier(t, env.Config)
	user := ""

	for _, obj := range objects {
		if !identityKinds[obj.GetKind()] || obj.GetAPIVersion() == "talos.dev/v1alpha1" {
			continue
		}

		require.NoError(t, a.apply(t.Context(), obj, false))

		if obj.GetKind() == "ServiceAccount" {
			user = fmt.Sprintf("system:serviceaccount:%s:%s", obj.GetNamespace(), obj.GetName())
		}

		if obj.GetNamespace() == "" {
			t.Cleanup(func() {
				gvk := obj.GroupVersionKind()
				mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if err == nil {
					err = a.dynamic.Resource(mapping.Resource).Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{})
				}

				if err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("failed to delete %s %s: %v", obj.GetKind(), obj.GetName(), err)
				}
			})
		}
	}

	require.NotEmpty(t, user, "the chart renders no ServiceAccount")

	return user
}

// serviceAccountGroups are the groups the apiserver puts a service account's requests in.
func serviceAccountGroups(namespace string) []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
}

// impersonate returns a copy of cfg that acts as the service account user of namespace.
func impersonate(cfg *rest.Config, user, namespace string) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: serviceAccountGroups(namespace)}

	return out
}
