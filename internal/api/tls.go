package api

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"

	"go.uber.org/zap"
)

// serverTLSConfig requires and verifies client certificates issued by opts.ClientCA. The files are read
// again on every handshake (clients connect rarely), so rotated certificates are used without a restart;
// a file that cannot be read then keeps the last good configuration.
func serverTLSConfig(opts Options, logger *zap.Logger) (*tls.Config, error) {
	load := func() (*tls.Config, error) {
		cert, err := tls.LoadX509KeyPair(opts.TLSCert, opts.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("failed to load --api-tls-cert and --api-tls-key: %w", err)
		}

		pool, err := loadCertPool(opts.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("failed to load --api-client-ca: %w", err)
		}

		return &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool,
			MinVersion:   tls.VersionTLS13,
		}, nil
	}

	last, err := load()
	if err != nil {
		return nil, err
	}

	var mu sync.Mutex

	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			mu.Lock()
			defer mu.Unlock()

			cfg, loadErr := load()
			if loadErr != nil {
				logger.Warn("failed to reload api certificates, using the previous ones", zap.Error(loadErr))

				return last, nil
			}

			last = cfg

			return cfg, nil
		},
	}, nil
}

// ClientOptions are a client's TLS settings for a tcp:// endpoint.
type ClientOptions struct {
	// CA verifies the server's certificate; empty means the system's roots.
	CA string
	// Cert and Key are the client certificate that the server requires.
	Cert, Key string
	// ServerName overrides the name the server's certificate is checked against (default: the host).
	ServerName string
}

func clientTLSConfig(opts ClientOptions) (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		ServerName: opts.ServerName,
	}

	if opts.CA != "" {
		pool, err := loadCertPool(opts.CA)
		if err != nil {
			return nil, fmt.Errorf("failed to load --tls-ca: %w", err)
		}

		cfg.RootCAs = pool
	}

	switch {
	case opts.Cert != "" && opts.Key != "":
		cert, err := tls.LoadX509KeyPair(opts.Cert, opts.Key)
		if err != nil {
			return nil, fmt.Errorf("failed to load --tls-cert and --tls-key: %w", err)
		}

		cfg.Certificates = []tls.Certificate{cert}
	case opts.Cert != "" || opts.Key != "":
		return nil, fmt.Errorf("--tls-cert and --tls-key go together")
	}

	return cfg, nil
}

func loadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read %q: %w", path, err)
	}

	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in %q", path)
	}

	return pool, nil
}
