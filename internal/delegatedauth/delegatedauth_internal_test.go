package delegatedauth

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestBearerToken(t *testing.T) {
	t.Parallel()

	for header, want := range map[string]string{
		"":                 "",
		"Bearer abc":       "abc",
		"bearer abc":       "abc",
		"Bearer  abc ":     "abc",
		"Bearer ":          "",
		"Basic YWRtaW46eA": "",
		"abc":              "",
	} {
		req, _ := http.NewRequest(http.MethodGet, "/metrics", nil) //nolint:noctx
		if header != "" {
			req.Header.Set("Authorization", header)
		}

		got, ok := bearerToken(req)
		assert.Equal(t, want, got, "%q", header)
		assert.Equal(t, want != "", ok, "%q", header)
	}
}

// The caches expire, and a flood of distinct keys never grows them past their bound. The test runs in a
// synctest bubble: its sleep moves the bubble's clock past the short entry's expiry, and waits for nothing.
func TestCache(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		var c cache[bool]

		c.put("short", true, time.Nanosecond)
		c.put("long", true, time.Hour)
		time.Sleep(time.Millisecond)

		_, ok := c.get("short")
		assert.False(t, ok, "expired")

		v, ok := c.get("long")
		assert.True(t, ok)
		assert.True(t, v)

		for i := range 3 * maxCacheEntries {
			c.put(fmt.Sprint(i), true, time.Hour)
		}

		assert.LessOrEqual(t, len(c.entries), maxCacheEntries)
	})
}

// reviewCounter is a clientset whose apiserver authenticates no token, counting the TokenReviews.
func reviewCounter(t *testing.T) (*fake.Clientset, *atomic.Int32) {
	t.Helper()

	var reviews atomic.Int32

	client := fake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		reviews.Add(1)

		return true, &authenticationv1.TokenReview{}, nil
	})

	return client, &reviews
}

func authenticateStatus(t *testing.T, g *Guard, token string) int {
	t.Helper()

	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)

	w := httptest.NewRecorder()
	g.Wrap(http.NotFoundHandler()).ServeHTTP(w, req)

	return w.Code
}

// A token the apiserver did not authenticate is answered from the negative cache until its TTL ends: a
// caller repeating it costs one review per TTL. The test runs in a synctest bubble: its sleeps move the
// bubble's clock past the TTL, and wait for nothing.
func TestNegativeCache(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		client, reviews := reviewCounter(t)
		g := New(client.AuthenticationV1().TokenReviews(), client.AuthorizationV1().SubjectAccessReviews(), Options{NegativeCacheTTL: time.Hour})

		for range 100 {
			require.Equal(t, http.StatusUnauthorized, authenticateStatus(t, g, "bad"))
		}

		assert.Equal(t, int32(1), reviews.Load())

		expired := New(client.AuthenticationV1().TokenReviews(), client.AuthorizationV1().SubjectAccessReviews(), Options{NegativeCacheTTL: time.Second})

		for range 3 {
			require.Equal(t, http.StatusUnauthorized, authenticateStatus(t, expired, "bad"))
			time.Sleep(2 * time.Second)
		}

		assert.Equal(t, int32(4), reviews.Load(), "reviewed again once the entry expired")

		for i := range 3 * maxNegativeCacheEntries {
			g.unknown.put(fmt.Sprint(i), struct{}{}, time.Hour)
		}

		assert.LessOrEqual(t, len(g.unknown.entries), maxNegativeCacheEntries)
	})
}

// Tokens found in no cache are reviewed at the limiter's rate: past its burst, 429 without a review.
func TestReviewRateLimit(t *testing.T) {
	t.Parallel()

	client, reviews := reviewCounter(t)
	// A rate so low that no token comes back during the test.
	g := New(client.AuthenticationV1().TokenReviews(), client.AuthorizationV1().SubjectAccessReviews(), Options{ReviewsPerSecond: 0.001, ReviewBurst: 5})

	var throttled int

	for i := range 100 {
		switch code := authenticateStatus(t, g, fmt.Sprint("distinct-", i)); code {
		case http.StatusTooManyRequests:
			throttled++
		case http.StatusUnauthorized:
		default:
			t.Fatalf("token %d: %d", i, code)
		}
	}

	assert.Equal(t, int32(5), reviews.Load(), "the burst, and no more")
	assert.Equal(t, 95, throttled)

	// A token already known is answered from the cache, throttled or not.
	assert.Equal(t, http.StatusUnauthorized, authenticateStatus(t, g, "distinct-0"))
	assert.Equal(t, int32(5), reviews.Load())
}
