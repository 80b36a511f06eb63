package config

import (
	"time"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// Defaults of the configuration: what talos-ccm runs with when no flag, no config file and no embedder
// sets a field. The command's flags, the embedding API and the decisions that read a Config all take them
// from here.
const (
	// DefaultProviderIDWait is how long a cloud machine waits for its providerID from Talos before the
	// talos:// fallback.
	DefaultProviderIDWait = 5 * time.Minute
	// DefaultClusterDomain is the cluster DNS domain: names under it are never approved in kubelet serving
	// certificates.
	DefaultClusterDomain = "cluster.local"
	// DefaultCSRMaxExpiration is the longest certificate lifetime a kubelet serving certificate request may
	// ask for: one year, kube-controller-manager's default signing duration.
	DefaultCSRMaxExpiration = 365 * 24 * time.Hour
	// DefaultCSRRequestsPerMinute is how many certificate requests a minute one requester may file before
	// its requests are throttled: a kubelet files one when it starts and one per rotation, and another
	// only after waiting minutes for the previous one.
	DefaultCSRRequestsPerMinute = 30
)

// DefaultSpec returns the configuration of the defaults, recorded as coming from source: IPv4 first and no
// transformation rules.
func DefaultSpec(source string) *specs.ConfigSpec {
	return &specs.ConfigSpec{
		ProviderIdWaitSeconds: int64(DefaultProviderIDWait / time.Second),
		ClusterDomain:         DefaultClusterDomain,
		CsrApproval:           &specs.CSRApprovalConfig{MaxExpirationSeconds: int64(DefaultCSRMaxExpiration / time.Second)},
		Source:                source,
	}
}
