package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
)

// profileAPIServers records each apiserver's CPU profile for d (apiserver-N-<moment>.pprof), on the
// apiserver's own /debug/pprof, in the background: where their share of the machine goes while clusters
// start. The result arrives once every profile was written; nothing is recorded when d is not positive.
func profileAPIServers(ctx context.Context, clients []*kubernetes.Clientset, dir string, d time.Duration, moment string) <-chan error {
	profiled := make(chan error, 1)

	if d <= 0 {
		profiled <- nil

		return profiled
	}

	go func() {
		var wg sync.WaitGroup

		errs := make([]error, len(clients))

		for i, client := range clients {
			wg.Go(func() {
				errs[i] = saveAPIServerProfile(ctx, client, d, filepath.Join(dir, fmt.Sprintf("apiserver-%d-%s.pprof", i+1, moment)))
			})
		}

		wg.Wait()

		profiled <- errors.Join(errs...)
	}()

	return profiled
}

// saveAPIServerProfile writes one apiserver's CPU profile of d to path.
func saveAPIServerProfile(ctx context.Context, client *kubernetes.Clientset, d time.Duration, path string) error {
	seconds := max(1, int(d.Round(time.Second).Seconds()))

	data, err := client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(seconds)).Timeout(d + time.Minute).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("failed to profile the apiserver: %w", err)
	}

	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("failed to write the apiserver's profile: %w", err)
	}

	return nil
}
