package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// access is one request talos-ccm's service account may or may not make.
type access struct {
	verb, group, resource, subresource, name string
	// namespace is "" for cluster-scoped resources, "release" for the release namespace.
	namespace string
}

func (a access) String() string {
	s := a.verb + " " + a.resource
	if a.group != "" {
		s += "." + a.group
	}

	if a.subresource != "" {
		s += "/" + a.subresource
	}

	if a.name != "" {
		s += " " + a.name
	}

	if a.namespace != "" {
		s += " in " + a.namespace
	}

	return s
}

// accesses, named by what they serve.
var (
	nodesRead      = []access{{verb: "get", resource: "nodes"}, {verb: "list", resource: "nodes"}, {verb: "watch", resource: "nodes"}}
	nodesWrite     = []access{{verb: "patch", resource: "nodes"}, {verb: "update", resource: "nodes"}, {verb: "patch", resource: "nodes", subresource: "status"}}
	nodesDelete    = []access{{verb: "delete", resource: "nodes"}}
	eventsWrite    = []access{{verb: "create", resource: "events", namespace: "default"}, {verb: "patch", resource: "events", namespace: "default"}, {verb: "create", resource: "events", namespace: "release"}}
	leaderElection = []access{
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: "release"},
		{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: "release", name: "LEASE"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "release", name: "LEASE"},
	}
	csrApproval = []access{
		{verb: "get", group: "certificates.k8s.io", resource: "certificatesigningrequests"},
		{verb: "list", group: "certificates.k8s.io", resource: "certificatesigningrequests"},
		{verb: "watch", group: "certificates.k8s.io", resource: "certificatesigningrequests"},
		{verb: "update", group: "certificates.k8s.io", resource: "certificatesigningrequests", subresource: "approval"},
		{verb: "approve", group: "certificates.k8s.io", resource: "signers", name: "kubernetes.io/kubelet-serving"},
		// The apiserver's endpoints (rule 9), by name only.
		{verb: "get", group: "discovery.k8s.io", resource: "endpointslices", namespace: "default", name: "kubernetes"},
		{verb: "list", group: "discovery.k8s.io", resource: "endpointslices", namespace: "default", name: "kubernetes"},
		{verb: "watch", group: "discovery.k8s.io", resource: "endpointslices", namespace: "default", name: "kubernetes"},
	}
	serviceLB = []access{
		{verb: "list", resource: "services"},
		{verb: "watch", resource: "services"},
		{verb: "patch", resource: "services", subresource: "status", namespace: "default"},
		// The labels pools select namespaces by.
		{verb: "list", resource: "namespaces"},
		{verb: "watch", resource: "namespaces"},
	}
	// metricsAuth are the reviews of the secure metrics endpoint's delegated authentication.
	metricsAuth = []access{
		{verb: "create", group: "authentication.k8s.io", resource: "tokenreviews"},
		{verb: "create", group: "authorization.k8s.io", resource: "subjectaccessreviews"},
	}
	// neverGranted are requests no configuration of the chart grants.
	neverGranted = []access{
		{verb: "create", resource: "nodes"},
		{verb: "get", resource: "secrets", namespace: "release"},
		{verb: "list", resource: "secrets"},
		{verb: "list", resource: "pods"},
		{verb: "get", resource: "configmaps", namespace: "release"},
		{verb: "update", resource: "services"},
		{verb: "update", resource: "namespaces", name: "default"},
		{verb: "create", group: "certificates.k8s.io", resource: "certificatesigningrequests"},
		{verb: "update", group: "certificates.k8s.io", resource: "certificatesigningrequests", subresource: "status"},
		{verb: "approve", group: "certificates.k8s.io", resource: "signers", name: "kubernetes.io/kube-apiserver-client"},
		{verb: "approve", group: "certificates.k8s.io", resource: "signers", name: "kubernetes.io/kube-apiserver-client-kubelet"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "release", name: "another-lease"},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: "default"},
		{verb: "delete", group: "coordination.k8s.io", resource: "leases", namespace: "release", name: "LEASE"},
		{verb: "escalate", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
		{verb: "impersonate", resource: "users"},
		{verb: "list", group: "discovery.k8s.io", resource: "endpointslices", namespace: "default"},
		{verb: "get", group: "discovery.k8s.io", resource: "endpointslices", namespace: "default", name: "another-service"},
		{verb: "list", group: "discovery.k8s.io", resource: "endpointslices"},
	}
)

func concat(lists ...[]access) []access {
	var out []access
	for _, l := range lists {
		out = append(out, l...)
	}

	return out
}

// TestRBACGrantsWhatTheControllersNeed applies the chart's ServiceAccount, ClusterRole, ClusterRoleBinding,
// Role and RoleBinding to the envtest apiserver (whose authorizer is Node,RBAC, as on Talos) and asks it,
// with SubjectAccessReviews for the service account, what talos-ccm may do: everything its enabled
// controllers need, nothing they do not.
func TestRBACGrantsWhatTheControllersNeed(t *testing.T) {
	t.Parallel()

	env := controlPlane(t)

	for _, tc := range []struct {
		name    string
		values  []string
		set     []string
		allowed []access
		denied  []access
	}{
		{
			name:    "default",
			allowed: concat(nodesRead, nodesWrite, eventsWrite, leaderElection, csrApproval, metricsAuth),
			denied:  concat(nodesDelete, serviceLB, neverGranted),
		},
		{
			name:    "stale node deletion",
			set:     []string{"nodeLifecycle.deleteStaleNodes=true"},
			allowed: concat(nodesRead, nodesWrite, nodesDelete, eventsWrite, leaderElection, csrApproval),
			denied:  concat(serviceLB, neverGranted),
		},
		{
			name:    "csr only",
			values:  []string{"ci/csr-only-values.yaml"},
			allowed: concat(nodesRead, eventsWrite, leaderElection, csrApproval),
			denied:  concat(nodesWrite, nodesDelete, serviceLB, neverGranted),
		},
		{
			name:    "service-lb without csr-approval",
			set:     []string{"controllers={*,service-lb,-csr-approval}"},
			allowed: concat(nodesRead, nodesWrite, eventsWrite, leaderElection, serviceLB),
			denied:  concat(nodesDelete, csrApproval, neverGranted),
		},
		{
			name:    "no leader election",
			set:     []string{"leaderElection.enabled=false"},
			allowed: concat(nodesRead, nodesWrite, eventsWrite, csrApproval),
			denied:  concat(nodesDelete, leaderElection, serviceLB, neverGranted),
		},
		{
			name:    "metrics off",
			set:     []string{"metrics.enabled=false"},
			allowed: concat(nodesRead, nodesWrite, eventsWrite, leaderElection, csrApproval),
			denied:  concat(nodesDelete, serviceLB, metricsAuth, neverGranted),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			// Release names differ too: ClusterRoles are cluster-scoped.
			release := "rbac-" + shortName(tc.name)
			namespace := release
			createNamespace(t, env, namespace)

			objects := render(t, release, namespace, tc.values, tc.set...)
			user := applyIdentity(t, env, objects)
			lease := release + "-talos-ccm"

			resolve := func(a access) access {
				if a.namespace == "release" {
					a.namespace = namespace
				}

				if a.name == "LEASE" {
					a.name = lease
				}

				return a
			}

			// RBAC changes reach the authorizer through its informers: wait for the grants first, then
			// the denials are meaningful.
			for _, a := range tc.allowed {
				a = resolve(a)

				testenv.Eventually(t, 20*time.Second, 100*time.Millisecond, fmt.Sprintf("%s may %s", user, a), func(context.Context) error {
					if !allowed(t, env, user, namespace, a) {
						return errors.New("denied")
					}

					return nil
				})
			}

			for _, a := range tc.denied {
				a = resolve(a)

				assert.False(t, allowed(t, env, user, namespace, a), "%s may not %s", user, a)
			}
		})
	}
}

// TestRBACNodeDeletionIsRefusedUnlessEnabled makes real requests as the chart's service account: deleting
// a Node is forbidden with the deletion flags off and allowed with one on.
func TestRBACNodeDeletionIsRefusedUnlessEnabled(t *testing.T) {
	t.Parallel()

	env := controlPlane(t)

	for _, tc := range []struct {
		name      string
		set       []string
		mayDelete bool
	}{
		{name: "off"},
		{name: "on", set: []string{"nodeLifecycle.deletePreemptedSpotNodes=true"}, mayDelete: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			namespace := "rbac-delete-" + tc.name
			createNamespace(t, env, namespace)

			user := applyIdentity(t, env, render(t, namespace, namespace, nil, tc.set...))

			client, err := kubernetes.NewForConfig(impersonate(env.Config, user, namespace))
			require.NoError(t, err)

			node := createNode(t, env, "rbac-delete-"+tc.name)

			// Reading Nodes is granted in both cases: wait for it, so that the RBAC objects are in force.
			testenv.Eventually(t, 20*time.Second, 100*time.Millisecond, user+" may read Nodes", func(ctx context.Context) error {
				_, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})

				return err
			})

			err = client.CoreV1().Nodes().Delete(t.Context(), node, metav1.DeleteOptions{})
			if tc.mayDelete {
				require.NoError(t, err)
			} else {
				require.True(t, apierrors.IsForbidden(err), "deleting a Node must be forbidden, got %v", err)
			}

			_, err = client.CoreV1().Secrets(namespace).List(t.Context(), metav1.ListOptions{})
			require.True(t, apierrors.IsForbidden(err), "reading Secrets must be forbidden, got %v", err)
		})
	}
}

// allowed asks the apiserver whether the service account user of namespace may make the request.
func allowed(t *testing.T, env *testenv.Env, user, namespace string, a access) bool {
	t.Helper()

	review, err := env.Clientset().AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: serviceAccountGroups(namespace),
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace:   a.namespace,
				Verb:        a.verb,
				Group:       a.group,
				Resource:    a.resource,
				Subresource: a.subresource,
				Name:        a.name,
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	return review.Status.Allowed
}

// createNode creates a Node as the admin and deletes it when the test ends.
func createNode(t *testing.T, env *testenv.Env, name string) string {
	t.Helper()

	_, err := env.Clientset().CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Cleanup(func() {
		err := env.Clientset().CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("failed to delete node %s: %v", name, err)
		}
	})

	return name
}

// shortName makes a DNS label out of a test case name.
func shortName(name string) string {
	out := make([]rune, 0, len(name))

	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			out = append(out, r)
		case r >= 'A' && r <= 'Z':
			out = append(out, r+'a'-'A')
		default:
			out = append(out, '-')
		}
	}

	return fmt.Sprintf("%.40s", string(out))
}
