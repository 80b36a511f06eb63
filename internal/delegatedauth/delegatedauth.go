// Package delegatedauth protects HTTP endpoints (talos-ccm's /metrics and /debug/pprof) as Kubernetes'
// own components protect theirs: the caller's bearer token is checked with a TokenReview, then the user it
// names is checked with a SubjectAccessReview for the request's verb on the non-resource URL, both asked of
// the apiserver and cached briefly. A Prometheus scraper needs a token of an account bound to a ClusterRole
// with `get` on the nonResourceURL `/metrics`; talos-ccm needs `create` on tokenreviews and
// subjectaccessreviews.
//
// Anyone who reaches the port can send tokens, so a token costs the apiserver at most one review in a while:
// a token the apiserver did not authenticate is answered from a small negative cache, and reviews of tokens
// not cached are rate limited (past the limit, 429 without asking). The reviews go through a client of the
// guard's own (NewForConfig), so that a flood never slows talos-ccm's other requests, the renewal of its
// leader lease first.
package delegatedauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

// Defaults of Options: the TTL and timeout are those of kube-controller-manager's delegated authentication
// and authorization; a scraper needs one review per token and TTL, so the rate is far above what scrapers
// need, and far below what would matter to the apiserver.
const (
	DefaultCacheTTL         = 10 * time.Second
	DefaultNegativeCacheTTL = 10 * time.Second
	DefaultReviewTimeout    = 10 * time.Second
	DefaultReviewsPerSecond = 5
	DefaultReviewBurst      = 10
)

// Bounds of the caches: a flood of distinct tokens must not grow the process without limit. Unknown tokens
// are what a flood brings, and each costs a review anyway, so their cache is small.
const (
	maxCacheEntries         = 4096
	maxNegativeCacheEntries = 1024
)

// errThrottled is the error of a token that would need a review while the reviews are over their rate.
var errThrottled = errors.New("too many token reviews")

// Options configure a Guard. The zero value of a field means its default.
type Options struct {
	// CacheTTL is how long a review's answer (allowed or not) is reused.
	CacheTTL time.Duration
	// NegativeCacheTTL is how long a token the apiserver did not authenticate is answered 401 without
	// asking again.
	NegativeCacheTTL time.Duration
	// ReviewTimeout bounds each review request to the apiserver.
	ReviewTimeout time.Duration
	// ReviewsPerSecond and ReviewBurst bound the TokenReviews of tokens found in no cache.
	ReviewsPerSecond float32
	ReviewBurst      int
	// Logger logs failed reviews; nil logs nothing.
	Logger *zap.Logger
}

// TokenReviewer creates TokenReviews: kubeclient.Client's TokenReviews, or client-go's
// AuthenticationV1().TokenReviews().
type TokenReviewer interface {
	Create(ctx context.Context, review *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

// AccessReviewer creates SubjectAccessReviews: kubeclient.Client's SubjectAccessReviews, or client-go's
// AuthorizationV1().SubjectAccessReviews().
type AccessReviewer interface {
	Create(ctx context.Context, review *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

// Guard authenticates and authorizes requests with the apiserver's TokenReview and SubjectAccessReview.
type Guard struct {
	tokenReviews  TokenReviewer
	accessReviews AccessReviewer
	opts          Options

	// tokens are the authenticated tokens, unknown those the apiserver did not authenticate.
	tokens    cache[tokenResult]
	unknown   cache[struct{}]
	decisions cache[bool]
	// reviews limits the TokenReviews.
	reviews flowcontrol.RateLimiter
}

// tokenResult is the answer of one TokenReview.
type tokenResult struct {
	authenticated bool
	user          authenticationv1.UserInfo
}

// New returns a Guard that asks the apiserver through tokenReviews and accessReviews. NewForConfig is the one
// to use beside other clients of the same apiserver.
func New(tokenReviews TokenReviewer, accessReviews AccessReviewer, opts Options) *Guard {
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = DefaultCacheTTL
	}

	if opts.NegativeCacheTTL <= 0 {
		opts.NegativeCacheTTL = DefaultNegativeCacheTTL
	}

	if opts.ReviewTimeout <= 0 {
		opts.ReviewTimeout = DefaultReviewTimeout
	}

	if opts.ReviewsPerSecond <= 0 {
		opts.ReviewsPerSecond = DefaultReviewsPerSecond
	}

	if opts.ReviewBurst <= 0 {
		opts.ReviewBurst = DefaultReviewBurst
	}

	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}

	return &Guard{
		tokenReviews:  tokenReviews,
		accessReviews: accessReviews,
		opts:          opts,
		unknown:       cache[struct{}]{max: maxNegativeCacheEntries},
		reviews:       flowcontrol.NewTokenBucketRateLimiter(opts.ReviewsPerSecond, opts.ReviewBurst),
	}
}

// NewForConfig returns a Guard that asks the apiserver of cfg through a client of its own: its own
// connection, and its own client-side rate limit instead of cfg's. Reviews, which anyone who reaches the
// port can cause, then never wait behind the other clients of cfg, nor hold them back (the renewal of the
// leader lease among them).
func NewForConfig(cfg *rest.Config, opts Options) (*Guard, error) {
	own := rest.CopyConfig(cfg)
	own.RateLimiter = nil
	// Room for the SubjectAccessReview that follows each TokenReview; the guard's own limit keeps them under it.
	own.QPS = 2 * max(opts.ReviewsPerSecond, DefaultReviewsPerSecond)
	own.Burst = 2 * max(opts.ReviewBurst, DefaultReviewBurst)
	// A dialer of its own gives the client a transport, and so connections, of its own.
	own.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext

	if own.UserAgent != "" {
		own.UserAgent += "/metrics-auth"
	}

	client, err := kubeclient.NewForConfig(own)
	if err != nil {
		return nil, fmt.Errorf("failed to create the metrics authentication client: %w", err)
	}

	return New(client.TokenReviews(), client.SubjectAccessReviews(), opts), nil
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
		if errors.Is(err, errThrottled) {
			// Not logged: a flood would be logged line by line.
			w.Header().Set("Retry-After", "1")
			http.Error(w, "Too Many Requests: token reviews are rate limited", http.StatusTooManyRequests)

			return
		}

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

// authenticate returns the user a token belongs to, from the caches or a TokenReview; errThrottled when it
// would need a review over the rate.
func (g *Guard) authenticate(ctx context.Context, token string) (authenticationv1.UserInfo, bool, error) {
	// The caches are keyed by a digest: tokens are not kept in memory longer than a request needs them.
	key := fmt.Sprintf("%x", sha256.Sum256([]byte(token)))

	if r, ok := g.tokens.get(key); ok {
		return r.user, r.authenticated, nil
	}

	if _, ok := g.unknown.get(key); ok {
		return authenticationv1.UserInfo{}, false, nil
	}

	if !g.reviews.TryAccept() {
		return authenticationv1.UserInfo{}, false, errThrottled
	}

	ctx, cancel := context.WithTimeout(ctx, g.opts.ReviewTimeout)
	defer cancel()

	review, err := g.tokenReviews.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, false, fmt.Errorf("failed to create TokenReview: %w", err)
	}

	if !review.Status.Authenticated {
		g.unknown.put(key, struct{}{}, g.opts.NegativeCacheTTL)

		return authenticationv1.UserInfo{}, false, nil
	}

	r := tokenResult{authenticated: true, user: review.Status.User}
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

	review, err := g.accessReviews.Create(ctx, &authorizationv1.SubjectAccessReview{
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
	// max bounds the entries; zero means maxCacheEntries.
	max int

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

	bound := c.max
	if bound <= 0 {
		bound = maxCacheEntries
	}

	if len(c.entries) >= bound {
		for k, e := range c.entries {
			if now.After(e.expires) {
				delete(c.entries, k)
			}
		}

		// Still full of live entries: start over rather than grow.
		if len(c.entries) >= bound {
			clear(c.entries)
		}
	}

	c.entries[key] = cacheEntry[V]{value: value, expires: now.Add(ttl)}
}
