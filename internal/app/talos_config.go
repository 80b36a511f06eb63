package app

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"sigs.k8s.io/yaml"
)

// talosAPIPort is apid's port, for the endpoints that name none.
const talosAPIPort = 50000

// talosConfig is a talosconfig file (the format of machinery's client/config): named contexts, one of them
// current, each with the endpoints and credentials of a Talos API.
type talosConfig struct {
	Context  string                   `json:"context"`
	Contexts map[string]*talosContext `json:"contexts"`

	// context is the current context.
	context *talosContext
}

// talosContext is one context of a talosconfig.
type talosContext struct {
	// Target is the single endpoint of old talosconfigs, before endpoints.
	Target    string   `json:"target,omitempty"`
	Endpoints []string `json:"endpoints"`
	// CA, Crt and Key are base64-encoded PEM: the CA that signed the endpoints' certificates (none: the
	// system's roots), and the client's certificate and key.
	CA      string    `json:"ca,omitempty"`
	Crt     string    `json:"crt,omitempty"`
	Key     string    `json:"key,omitempty"`
	Auth    talosAuth `json:"auth,omitempty"`
	Cluster string    `json:"cluster,omitempty"`
}

// talosAuth holds the credentials of an authentication other than the client certificate.
type talosAuth struct {
	Basic *struct {
		Username string `json:"username"`
		Password string `json:"password"`
	} `json:"basic,omitempty"`
	// SideroV1 is Omni's signed requests, which need the user's PGP keys: not supported.
	SideroV1 *struct {
		Identity string `json:"identity"`
	} `json:"siderov1,omitempty"`
}

// readTalosConfig reads the talosconfig at path, and resolves its current context.
func readTalosConfig(path string) (*talosConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read talosconfig %q: %w", path, err)
	}

	cfg := &talosConfig{}
	if err = yaml.Unmarshal(data, cfg); err != nil {
		return nil, fmt.Errorf("failed to read talosconfig %q: %w", path, err)
	}

	var ok bool

	switch cfg.context, ok = cfg.Contexts[cfg.Context]; {
	case !ok && len(cfg.Contexts) == 0:
		return nil, fmt.Errorf("failed to read talosconfig %q: it has no context", path)
	case !ok || cfg.context == nil:
		return nil, fmt.Errorf("failed to read talosconfig %q: its context %q is not in it", path, cfg.Context)
	case cfg.context.Auth.SideroV1 != nil:
		return nil, fmt.Errorf("failed to read talosconfig %q: context %q signs its requests with a PGP key (Omni), which talos-ccm does not support: use a talosconfig with a client certificate", path, cfg.Context)
	}

	return cfg, nil
}

// endpoints are the current context's endpoints.
func (cfg *talosConfig) endpoints() []string {
	if cfg.context.Target != "" {
		return append(cfg.context.Endpoints, cfg.context.Target)
	}

	return cfg.context.Endpoints
}

// tlsConfig is the current context's TLS configuration: its CA (or the system's roots) to verify the
// endpoints, its client certificate to authenticate.
func (cfg *talosConfig) tlsConfig() (*tls.Config, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}

	if cfg.context.CA != "" {
		ca, err := base64.StdEncoding.DecodeString(cfg.context.CA)
		if err != nil {
			return nil, fmt.Errorf("failed to decode the CA: %w", err)
		}

		tlsConfig.RootCAs = x509.NewCertPool()
		if !tlsConfig.RootCAs.AppendCertsFromPEM(ca) {
			return nil, errors.New("failed to decode the CA: no PEM certificate")
		}
	}

	if cfg.context.Crt != "" || cfg.context.Key != "" {
		crt, err := base64.StdEncoding.DecodeString(cfg.context.Crt)
		if err != nil {
			return nil, fmt.Errorf("failed to decode the client certificate: %w", err)
		}

		key, err := base64.StdEncoding.DecodeString(cfg.context.Key)
		if err != nil {
			return nil, fmt.Errorf("failed to decode the client key: %w", err)
		}

		pair, err := tls.X509KeyPair(crt, key)
		if err != nil {
			return nil, fmt.Errorf("failed to load the client certificate: %w", err)
		}

		tlsConfig.Certificates = []tls.Certificate{pair}
	}

	return tlsConfig, nil
}

// talosEndpointsScheme is the scheme of the resolver of several endpoints.
const talosEndpointsScheme = "talos-endpoints"

// talosTarget is the gRPC target of the Talos API at endpoints, and the dial options it needs. One endpoint
// is resolved by DNS (a name may stand for several machines); several are balanced round-robin, each
// verified under its own name, as the machinery client does.
func talosTarget(endpoints []string) (string, []grpc.DialOption, error) {
	if len(endpoints) == 0 {
		return "", nil, errors.New("no Talos API endpoint: set --talos-endpoints or the talosconfig's endpoints")
	}

	if len(endpoints) == 1 {
		return "dns:///" + talosEndpointAddress(endpoints[0]), nil, nil
	}

	addrs := make([]resolver.Address, 0, len(endpoints))

	for _, e := range endpoints {
		addr := talosEndpointAddress(e)
		host, _, _ := net.SplitHostPort(addr)

		addrs = append(addrs, resolver.Address{Addr: addr, ServerName: host})
	}

	r := manual.NewBuilderWithScheme(talosEndpointsScheme)
	r.InitialState(resolver.State{Addresses: addrs})

	return talosEndpointsScheme + ":///talos", []grpc.DialOption{
		grpc.WithResolvers(r),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"round_robin": {}}]}`),
	}, nil
}

// talosEndpointAddress is the host:port of a talosconfig endpoint: a host, host:port, or a URL
// ("https://host" is port 443); apid's port when it names none.
func talosEndpointAddress(endpoint string) string {
	if u, err := url.Parse(endpoint); err == nil && u.Scheme != "" {
		switch {
		case u.Port() != "":
			endpoint = net.JoinHostPort(u.Hostname(), u.Port())
		case u.Scheme == "https":
			endpoint = net.JoinHostPort(u.Hostname(), "443")
		case u.Opaque == "":
			endpoint = u.Host
		}
	}

	if _, _, err := net.SplitHostPort(endpoint); err != nil {
		return net.JoinHostPort(endpoint, strconv.Itoa(talosAPIPort))
	}

	return endpoint
}

func base64Text(s string) string {
	return base64.StdEncoding.EncodeToString([]byte(s))
}
