package kubeclient

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// TestClientMakesGroupsOnFirstUse: a client makes the REST client of a group when the group is first used,
// once however many use it at once, with the client's one rate limiter; the Nodes client at once.
func TestClientMakesGroupsOnFirstUse(t *testing.T) {
	t.Parallel()

	c, err := NewForConfig(&rest.Config{Host: "https://127.0.0.1:6443", QPS: 10, Burst: 20})
	require.NoError(t, err)

	require.NotNil(t, c.nodes)

	for _, g := range []*lazyGroup{&c.core, &c.certificates, &c.coordination, &c.discovery, &c.authentication, &c.authorization} {
		assert.Nil(t, g.client, "no group's client before its first use")
	}

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[*rest.RESTClient]bool{}
	)

	for range 8 {
		wg.Go(func() {
			client := restClientOf(t, c.Events("default").client)

			mu.Lock()
			seen[client] = true
			mu.Unlock()
		})
	}

	wg.Wait()

	require.Len(t, seen, 1, "one client of the core group however many asked at once")
	assert.Same(t, restClientOf(t, c.core.client), restClientOf(t, c.Services("default").client))
	assert.Same(t, c.nodes.GetRateLimiter(), c.core.client.GetRateLimiter(), "one rate limiter for every group")
	assert.Nil(t, c.certificates.client, "a group no one used is still not made")

	assert.NotNil(t, c.CertificateSigningRequests().client)
	assert.Equal(t, "/apis/certificates.k8s.io/v1", c.certificates.client.Get().URL().Path)
	assert.Equal(t, "/api/v1", c.core.client.Get().URL().Path)
}

// restClientOf is the REST client a group's client wraps.
func restClientOf(t *testing.T, client rest.Interface) *rest.RESTClient {
	t.Helper()

	negotiating, ok := client.(negotiatingClient)
	require.True(t, ok, "%T", client)

	rc, ok := negotiating.Interface.(*rest.RESTClient)
	require.True(t, ok, "%T", negotiating.Interface)

	return rc
}

// TestNewForConfigRefusesABadServer: the configuration is checked when the client is made, not at a group's
// first use.
func TestNewForConfigRefusesABadServer(t *testing.T) {
	t.Parallel()

	_, err := NewForConfig(&rest.Config{Host: "https://[::1"})
	require.Error(t, err)
}

// BenchmarkNewForConfig: what making a client costs, as each controller of each pipeline makes one.
func BenchmarkNewForConfig(b *testing.B) {
	cfg := &rest.Config{Host: "https://127.0.0.1:6443", QPS: 10, Burst: 20}

	b.ReportAllocs()

	for b.Loop() {
		c, err := NewForConfig(cfg)
		if err != nil {
			b.Fatal(err)
		}

		_ = c.Events("default")
	}
}
