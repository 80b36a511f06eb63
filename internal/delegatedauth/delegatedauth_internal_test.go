package delegatedauth

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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

// The caches expire, and a flood of distinct keys never grows them past their bound.
func TestCache(t *testing.T) {
	t.Parallel()

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
}
