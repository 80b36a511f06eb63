package main

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/kubernetes"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// fleet are the envtest apiservers the clusters share.
type fleet struct {
	envs        []*testenv.Env
	stops       []func()
	kubeconfigs []string
	clients     []*kubernetes.Clientset
	// ports are the apiservers' ports: the host's connections to them are counted.
	ports map[int]bool
}

// startFleet starts n apiservers, with their kubeconfigs in dir.
func startFleet(ctx context.Context, n int, dir string) (*fleet, error) {
	f := &fleet{ports: map[int]bool{}}

	for i := range n {
		if ctx.Err() != nil {
			f.stop()

			return nil, ctx.Err()
		}

		step("starting apiserver %d of %d", i+1, n)

		env, stop, err := testenv.StartShared()
		if err != nil {
			f.stop()

			return nil, err
		}

		f.envs, f.stops = append(f.envs, env), append(f.stops, stop)

		path := filepath.Join(dir, fmt.Sprintf("kubeconfig-%d", i))
		if err = env.WriteKubeconfig(path); err != nil {
			f.stop()

			return nil, err
		}

		f.kubeconfigs = append(f.kubeconfigs, path)

		client, err := adminClient(env.Config)
		if err != nil {
			f.stop()

			return nil, err
		}

		f.clients = append(f.clients, client)

		u, err := url.Parse(env.Config.Host)
		if err != nil {
			f.stop()

			return nil, fmt.Errorf("failed to parse the apiserver's address: %w", err)
		}

		port, err := strconv.Atoi(u.Port())
		if err != nil {
			f.stop()

			return nil, fmt.Errorf("failed to parse the apiserver's port: %w", err)
		}

		f.ports[port] = true
	}

	return f, nil
}

func (f *fleet) stop() {
	for _, stop := range f.stops {
		stop()
	}

	f.stops = nil
}
