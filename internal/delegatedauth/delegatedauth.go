// Package delegatedauth protects HTTP endpoints (talos-ccm's /metrics and /debug/pprof) as Kubernetes'
// own components protect theirs: the caller's bearer token is checked with a TokenReview, then the user it
// names is checked with a SubjectAccessReview for the request's verb on the non-resource URL, both asked of
// the apiserver and cached briefly. A Prometheus scraper needs a token of an account bound to a ClusterRole
// with `get` on the nonResourceURL `/metrics`; talos-ccm needs `create` on tokenreviews and
// subjectaccessreviews.
package delegatedauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Defaults of Options, those of kube-controller-manager's delegated authentication and authorization.
const (
	DefaultCacheTTL      = 10 * time.Second
	DefaultReviewTimeout = 10 * time.Second
)

// maxCacheEntries bounds each cache: a flood of distinct tokens must not grow the process without limit.
const maxCacheEntries = 4096

// Options configure a Guard. The zero value of a field means its default.
type Options struct {
	// CacheTTL is how long a review's answer (allowed or not) is reused.
	CacheTTL time.Duration
	// ReviewTimeout bounds each review request to the apiserver.
	ReviewTimeout time.Duration
	// Logger logs failed reviews; nil logs nothing.
	Logger *zap.Logger
}

// Guard authenticates and authorizes requests with the apiserver's TokenReview and SubjectAccessReview.
type Guard struct {
	client kubernetes.Interface
	opts   Options

	tokens    cache[tokenResult]
	decisions cache[bool]
}

// tokenResult is the answer of one TokenReview.
type tokenResult struct {
	authenticated bool
	user          authenticationv1.UserInfo
}

// New returns a Guard that asks the apiserver of client.
func New(client kubernetes.Interface, opts Options) *Guard {
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = DefaultCacheTTL
	}

	if opts.ReviewTimeout <= 0 {
		opts.ReviewTimeout = DefaultReviewTimeout
	}

	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}

	return &Guard{client: client, opts: opts}
}

// Wrap serves next only to callers allowed to: 401 without a valid bearer token, 403 when its user may not
// make the request, 500 when the apiserver cannot be asked.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, ok := bearerToken(req)
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)

			return
		}

		user, authenticated, err := g.authenticate(req.Context(), token)
		if err != nil {
			g.opts.Logger.Warn("failed to review token", zap.Error(err))
			http.Error(w, "Internal Server Error: failed to authenticate the request", http.StatusInternalServerError)

			return
		}

		if !authenticated {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)

			return
		}

		verb := httpVerb(req.Method)

		allowed, err := g.authorize(req.Context(), user, req.URL.Path, verb)
		if err != nil {
			g.opts.Logger.Warn("failed to review access", zap.String("user", user.Username), zap.Error(err))
			http.Error(w, "Internal Server Error: failed to authorize the request", http.StatusInternalServerError)

			return
		}

		if !allowed {
			http.Error(w, fmt.Sprintf("Forbidden: %s may not %s %s", user.Username, verb, req.URL.Path), http.StatusForbidden)

			return
		}

		next.ServeHTTP(w, req)
	})
}

// authenticate returns the user a token belongs to, from the cache or a TokenReview.
func (g *Guard) authenticate(ctx context.Context, token string) (authenticationv1.UserInfo, bool, error) {
	// The cache is keyed by a digest: tokens are not kept in memory longer than a request needs them.
	key := fmt.Sprintf("%x", sha256.Sum256([]byte(token)))

	if r, ok := g.tokens.get(key); ok {
		return r.user, r.authenticated, nil
	}

	ctx, cancel := context.WithTimeout(ctx, g.opts.ReviewTimeout)
	defer cancel()

	review, err := g.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, false, fmt.Errorf("failed to create TokenReview: %w", err)
	}

	r := tokenResult{authenticated: review.Status.Authenticated, user: review.Status.User}
	g.tokens.put(key, r, g.opts.CacheTTL)

	return r.user, r.authenticated, nil
}

// authorize asks whether user may make verb on the non-resource URL path, from the cache or a
// SubjectAccessReview.
func (g *Guard) authorize(ctx context.Context, user authenticationv1.UserInfo, path, verb string) (bool, error) {
	key := strings.Join([]string{user.Username, user.UID, strings.Join(user.Groups, ","), fmt.Sprint(user.Extra), verb, path}, "\x00")

	if allowed, ok := g.decisions.get(key); ok {
		return allowed, nil
	}

	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}

	ctx, cancel := context.WithTimeout(ctx, g.opts.ReviewTimeout)
	defer cancel()

	review, err := g.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  user.Username,
			UID:                   user.UID,
			Groups:                user.Groups,
			Extra:                 extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("failed to create SubjectAccessReview: %w", err)
	}

	g.decisions.put(key, review.Status.Allowed, g.opts.CacheTTL)

	return review.Status.Allowed, nil
}

// bearerToken returns the token of an "Authorization: Bearer TOKEN" header.
func bearerToken(req *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}

	token = strings.TrimSpace(token)

	return token, token != ""
}

// httpVerb maps an HTTP method to the verb of a non-resource request, as the apiserver does.
func httpVerb(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	default:
		return strings.ToLower(method)
	}
}

// cache maps keys to values until they expire.
type cache[V any] struct {
	mu      sync.Mutex
	entries map[string]cacheEntry[V]
}

type cacheEntry[V any] struct {
	value   V
	expires time.Time
}

func (c *cache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()

	e, ok := c.entries[key]
	if !ok || time.Now().After(e.expires) {
		var zero V

		return zero, false
	}

	return e.value, true
}

func (c *cache[V]) put(key string, value V, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()

	now := time.Now()

	if c.entries == nil {
		c.entries = map[string]cacheEntry[V]{}
	}

	if len(c.entries) >= maxCacheEntries {
		for k, e := range c.entries {
			if now.After(e.expires) {
				delete(c.entries, k)
			}
		}

		// Still full of live entries: start over rather than grow.
		if len(c.entries) >= maxCacheEntries {
			clear(c.entries)
		}
	}

	c.entries[key] = cacheEntry[V]{value: value, expires: now.Add(ttl)}
}
