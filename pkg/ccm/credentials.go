package ccm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/rest"
)

// CredentialsRetry is the shortest time between two calls of Options.ClientConfig that 401 Unauthorized
// answers cause: a provider that keeps returning credentials the apiserver refuses is not called in a loop.
// The host's own signal (CCM.RefreshCredentials) is not held back.
const CredentialsRetry = 10 * time.Second

// credentials follow a cluster's credentials from Options.ClientConfig.
type credentials struct {
	get    ClientConfigFunc
	logger *zap.Logger
	// failed is signalled by 401 answers, refresh by the host.
	failed, refresh chan struct{}
	// changed, if set, is called after every rotation or failure (Options.CredentialsChanged).
	changed func()

	mu sync.Mutex
	// rotations counts the new credentials the connections switched to, the last at rotatedAt.
	rotations int
	rotatedAt time.Time
	// lastErr is the last failure to get or use credentials, cleared by a rotation.
	lastErr error
}

// clientConfig returns the client configuration the pipeline starts with: Options.RestConfig, or the first
// answer of Options.ClientConfig, which c then follows (followCredentials).
func (c *CCM) clientConfig(ctx context.Context) (*rest.Config, error) {
	if c.opts.ClientConfig == nil {
		if c.opts.RestConfig == nil {
			return nil, errors.New("failed to register talos-ccm: no Kubernetes client configuration (Options.RestConfig or Options.ClientConfig)")
		}

		return c.opts.RestConfig, nil
	}

	c.credentials = &credentials{
		get:     c.opts.ClientConfig,
		logger:  c.logger.Named("credentials"),
		failed:  make(chan struct{}, 1),
		refresh: make(chan struct{}, 1),
		changed: c.opts.CredentialsChanged,
	}

	return c.credentials.fetch(ctx)
}

// fetch asks the provider for the current configuration.
func (cr *credentials) fetch(ctx context.Context) (*rest.Config, error) {
	cfg, err := cr.get(ctx)

	switch {
	case err != nil:
		err = fmt.Errorf("failed to get the Kubernetes client configuration: %w", err)
	case cfg == nil:
		err = errors.New("failed to get the Kubernetes client configuration: the client provider returned none")
	}

	if err != nil {
		cr.mu.Lock()
		cr.lastErr = err
		cr.mu.Unlock()

		return nil, err
	}

	return cfg, nil
}

// notify calls changed, if set.
func (cr *credentials) notify() {
	if cr.changed != nil {
		cr.changed()
	}
}

// unauthorized records a 401 answer, without blocking. A nil cr (a fixed RestConfig) ignores it.
func (cr *credentials) unauthorized() {
	if cr == nil {
		return
	}

	select {
	case cr.failed <- struct{}{}:
	default:
	}
}

// RefreshCredentials asks Options.ClientConfig for the cluster's credentials again, without waiting: the
// host's signal that it rotated them. With a fixed RestConfig it does nothing.
func (c *CCM) RefreshCredentials() {
	if c.credentials == nil {
		return
	}

	select {
	case c.credentials.refresh <- struct{}{}:
	default:
	}
}

// CredentialsState is what became of the credentials a pipeline follows (Options.ClientConfig).
type CredentialsState struct {
	// Rotations counts the new credentials the connections switched to, the last at RotatedAt.
	Rotations int
	RotatedAt time.Time
	// LastError is the last failure to get or use credentials since then; nil if none.
	LastError error
}

// Credentials reports the credential rotations so far, and the last failure to get or use credentials
// since the last rotation. With a fixed RestConfig it is the zero value.
func (c *CCM) Credentials() CredentialsState {
	cr := c.credentials
	if cr == nil {
		return CredentialsState{}
	}

	cr.mu.Lock()
	defer cr.mu.Unlock()

	return CredentialsState{Rotations: cr.rotations, RotatedAt: cr.rotatedAt, LastError: cr.lastErr}
}

// followCredentials asks the provider again on every 401 answer (at most every CredentialsRetry) and on
// every RefreshCredentials, and switches the connections to what it returns, until ctx is done (nil). It
// returns an error when the provider names another apiserver: the pipeline must be built again. With a
// fixed RestConfig it returns nil at once.
func (c *CCM) followCredentials(ctx context.Context) error {
	cr := c.credentials
	if cr == nil {
		return nil
	}

	var next time.Time

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-cr.refresh:
		case <-cr.failed:
			if wait := time.Until(next); wait > 0 {
				timer := time.NewTimer(wait)

				select {
				case <-ctx.Done():
					timer.Stop()

					return nil
				case <-timer.C:
				case <-cr.refresh:
					timer.Stop()
				}
			}
		}

		next = time.Now().Add(CredentialsRetry)

		if err := c.rotateCredentials(ctx); err != nil {
			return err
		}
	}
}

// rotateCredentials gets the provider's configuration and switches the connections to it; only a change of
// apiserver is returned (the pipeline is built again), other failures are recorded and logged.
func (c *CCM) rotateCredentials(ctx context.Context) error {
	cr := c.credentials

	cfg, err := cr.fetch(ctx)
	if err != nil {
		if ctx.Err() == nil {
			cr.logger.Warn("failed to refresh the Kubernetes credentials", zap.Error(err))
			cr.notify()
		}

		return nil
	}

	rotated, err := c.conns.rotate(cfg)

	switch {
	case errors.Is(err, errServerChanged):
		return fmt.Errorf("new Kubernetes credentials: %w (%s)", err, cfg.Host)
	case err != nil:
		cr.mu.Lock()
		cr.lastErr = fmt.Errorf("failed to switch to new Kubernetes credentials: %w", err)
		cr.mu.Unlock()

		cr.logger.Warn("failed to switch to new Kubernetes credentials", zap.Error(err))
		cr.notify()
	case rotated:
		cr.mu.Lock()
		cr.rotations++
		cr.rotatedAt = time.Now()
		cr.lastErr = nil
		cr.mu.Unlock()

		cr.logger.Info("switched to new Kubernetes credentials")
		cr.notify()
	default:
		cr.logger.Debug("the client provider returned the credentials in use")
	}

	return nil
}
