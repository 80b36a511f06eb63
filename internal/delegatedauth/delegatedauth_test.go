package delegatedauth_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/talos-ccm/talos-ccm/internal/delegatedauth"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// serviceAccountToken creates a service account in namespace and returns a token of it.
func serviceAccountToken(t *testing.T, client kubernetes.Interface, namespace, name string) string {
	t.Helper()

	_, err := client.CoreV1().ServiceAccounts(namespace).Create(t.Context(), &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	expiration := int64(3600)

	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(t.Context(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiration},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	return tr.Status.Token
}

// TestGuard asks a real apiserver: a service account bound to a ClusterRole with get on /metrics gets the
// metrics, one without gets 403, a request without a token or with a bad one gets 401; and a path the role
// does not name (a profile) is refused to the scraper.
func TestGuard(t *testing.T) {
	t.Parallel()

	env := testenv.Start(t)
	admin := env.Clientset()

	const namespace = "monitoring"

	_, err := admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)

	scraper := serviceAccountToken(t, admin, namespace, "prometheus")
	stranger := serviceAccountToken(t, admin, namespace, "stranger")

	_, err = admin.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	_, err = admin.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: namespace}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// A short cache, so that the wait for the RBAC informers below is not stretched by a cached denial.
	guard := delegatedauth.New(admin.AuthenticationV1().TokenReviews(), admin.AuthorizationV1().SubjectAccessReviews(), delegatedauth.Options{CacheTTL: 100 * time.Millisecond, Logger: zaptest.NewLogger(t)})

	srv := httptest.NewServer(guard.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "secret numbers")
	})))
	t.Cleanup(srv.Close)

	get := func(path, token string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
		require.NoError(t, err)

		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}

		resp, err := srv.Client().Do(req)
		require.NoError(t, err)

		defer resp.Body.Close() //nolint:errcheck

		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)

		return resp.StatusCode, string(body)
	}

	// The binding reaches the apiserver's authorizer through its informers, which tell no client when: a
	// poll is the only way to wait for it.
	require.Eventually(t, func() bool {
		code, _ := get("/metrics", scraper)

		return code == http.StatusOK
	}, 20*time.Second, 100*time.Millisecond, "the bound service account reads /metrics")

	code, body := get("/metrics", scraper)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "secret numbers\n", body)

	code, body = get("/metrics", stranger)
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, body, "system:serviceaccount:monitoring:stranger")
	assert.NotContains(t, body, "secret numbers")

	code, _ = get("/debug/pprof/heap", scraper)
	assert.Equal(t, http.StatusForbidden, code, "the role names /metrics only")

	code, body = get("/metrics", "")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.NotContains(t, body, "secret numbers")

	code, _ = get("/metrics", "not-a-token")
	assert.Equal(t, http.StatusUnauthorized, code)

	// Another scheme is no bearer token.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/metrics", nil)
	require.NoError(t, err)
	req.SetBasicAuth("admin", scraper)

	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// TestFloodOfBadTokens floods a guard made for a configuration shared with the leader lease's client
// (NewForConfig) with distinct bad tokens, as anyone who reaches the metrics port can: the apiserver gets at
// most the reviews the guard's rate allows, and the lease client's rate limiter gives not one token to them.
func TestFloodOfBadTokens(t *testing.T) {
	t.Parallel()

	env := testenv.Start(t)

	const (
		burst = 5
		flood = 300
	)

	// The lease client's limiter: its burst is all a client of this configuration may send at once.
	lease := flowcontrol.NewTokenBucketRateLimiter(0.001, burst)

	cfg, counter := testenv.CountRequests(env.Config)
	cfg.RateLimiter = lease

	guard, err := delegatedauth.NewForConfig(cfg, delegatedauth.Options{ReviewsPerSecond: 1, ReviewBurst: burst, Logger: zaptest.NewLogger(t)})
	require.NoError(t, err)

	srv := httptest.NewServer(guard.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "secret numbers")
	})))
	t.Cleanup(srv.Close)

	start := time.Now()
	codes := map[int]int{}

	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)

	for i := range flood {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/metrics", nil)
			if !assert.NoError(t, err) {
				return
			}

			req.Header.Set("Authorization", fmt.Sprintf("Bearer bad-token-%d", i))

			resp, err := srv.Client().Do(req)
			if !assert.NoError(t, err) {
				return
			}

			resp.Body.Close() //nolint:errcheck

			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		})
	}

	wg.Wait()

	// The rate gives one review a second beyond the burst, and one more for a second begun.
	allowed := burst + int64(time.Since(start).Seconds()) + 1
	requests, _ := counter.Take()

	assert.LessOrEqual(t, requests, allowed, "TokenReviews for %d bad tokens", flood)
	assert.Positive(t, requests, "the guard asks the apiserver")
	assert.Equal(t, flood, codes[http.StatusUnauthorized]+codes[http.StatusTooManyRequests], "every bad token refused: %v", codes)

	for i := range burst {
		assert.True(t, lease.TryAccept(), "the lease client's limiter still has token %d of its burst", i+1)
	}
}
