package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CountKubernetesRequests wraps a Kubernetes client transport so that every request is counted in
// KubernetesRequests, and the time the apiserver took to answer (after the client's rate limit, before the
// body is read) observed in KubernetesRequestDuration.
func CountKubernetesRequests(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		verb, resource := classifyRequest(req)

		start := time.Now()
		resp, err := next.RoundTrip(req)

		if verb != "watch" {
			KubernetesRequestDuration.WithLabelValues(verb, resource).Observe(time.Since(start).Seconds())
		}

		code := "error"
		if err == nil {
			code = strconv.Itoa(resp.StatusCode)
		}

		KubernetesRequests.WithLabelValues(verb, resource, code).Inc()

		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// classifyRequest names a request's verb (as in Kubernetes RBAC, with "apply" for server-side apply) and
// resource (with its subresource), from the request path:
// /api/v1/nodes/NAME/status, /apis/GROUP/VERSION/namespaces/NS/RESOURCE/NAME/SUB.
func classifyRequest(req *http.Request) (verb, resource string) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")

	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return strings.ToLower(req.Method), "other"
	}

	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) > 2 {
		parts = parts[2:]
	}

	if len(parts) == 0 {
		return strings.ToLower(req.Method), "other"
	}

	resource = parts[0]
	named := len(parts) >= 2

	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}

	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
		if strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch") {
			verb = "apply"
		}
	case http.MethodDelete:
		verb = "delete"
	default:
		verb = strings.ToLower(req.Method)
	}

	return verb, resource
}
