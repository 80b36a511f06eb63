package ccm_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// exampleAPIServer is an apiserver address nothing listens on: the examples run everywhere, and show what
// happens before the cluster's apiserver answers.
const exampleAPIServer = "https://127.0.0.1:1"

// A program that runs one cluster builds its pipeline with New: nothing reaches Kubernetes before Run.
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	opts := ccm.DefaultOptions()
	opts.RestConfig = &rest.Config{Host: exampleAPIServer, BearerToken: "token"}
	opts.Controllers = []string{"*", "-node-lifecycle"}

	// A nil state is an in-memory one of the pipeline's own; a program that keeps the decisions across
	// restarts gives its own.
	pipeline, err := ccm.New(ctx, nil, opts)
	if err != nil {
		fmt.Println(err)

		return
	}
	defer pipeline.Close()

	fmt.Println(pipeline.Controllers())
	// Output: [cloud-node csr-approval]
}

// changes turns Options.CredentialsChanged into events to wait on.
type changes chan struct{}

// notify is an Options.CredentialsChanged: it never blocks.
func (c changes) notify() {
	select {
	case c <- struct{}{}:
	default:
	}
}

// waitFor waits until done holds, asking it again after every change; false when ctx ends first.
func (c changes) waitFor(ctx context.Context, done func() bool) bool {
	for !done() {
		select {
		case <-c:
		case <-ctx.Done():
			return false
		}
	}

	return true
}

// runPipeline runs the pipeline until stop, which waits for Run to return.
func runPipeline(ctx context.Context, pipeline *ccm.CCM) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)

	go func() { done <- pipeline.Run(ctx) }()

	return func() {
		cancel()

		if err := <-done; err != nil {
			fmt.Println(err)
		}
	}
}

// A host whose credentials rotate gives a client provider instead of a fixed configuration, and signals
// a rotation with RefreshCredentials: the pipeline asks the provider again and switches every connection to
// the new credentials at once (it does so on its own when the apiserver answers 401 Unauthorized).
func ExampleCCM_RefreshCredentials() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The host's current credentials of the cluster.
	var (
		mu    sync.Mutex
		token = "token-1"
	)

	changed := make(changes, 1)

	pipeline, err := ccm.New(ctx, nil, ccm.Options{
		ClientConfig: func(context.Context) (*rest.Config, error) {
			mu.Lock()
			defer mu.Unlock()

			return &rest.Config{Host: exampleAPIServer, BearerToken: token}, nil
		},
		// Called after every switch to new credentials, and every failure to get or use them.
		CredentialsChanged: changed.notify,
	})
	if err != nil {
		fmt.Println(err)

		return
	}
	defer pipeline.Close()

	stop := runPipeline(ctx, pipeline)
	defer stop()

	// The host rotated the credentials: it tells the pipeline.
	mu.Lock()
	token = "token-2"
	mu.Unlock()

	pipeline.RefreshCredentials()

	if changed.waitFor(ctx, func() bool { return pipeline.Credentials().Rotations > 0 }) {
		fmt.Println("rotations:", pipeline.Credentials().Rotations)
	}
	// Output: rotations: 1
}

// A program reads what the pipeline met at the apiserver: whether it refuses the credentials, or cannot be
// reached, and since when. Options.CredentialsChanged says when either begins or ends.
func ExampleCCM_APIServer() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	changed := make(changes, 1)

	pipeline, err := ccm.New(ctx, nil, ccm.Options{
		RestConfig:         &rest.Config{Host: exampleAPIServer, BearerToken: "token"},
		CredentialsChanged: changed.notify,
	})
	if err != nil {
		fmt.Println(err)

		return
	}
	defer pipeline.Close()

	stop := runPipeline(ctx, pipeline)
	defer stop()

	if changed.waitFor(ctx, func() bool { return !pipeline.APIServer().UnreachableSince.IsZero() }) {
		// Unreachable is the last failure, as the connection says it (here, connection refused).
		fmt.Println("unreachable:", pipeline.APIServer().Unreachable != "")
		fmt.Println("refused:", !pipeline.APIServer().RefusedSince.IsZero())
	}
	// Output:
	// unreachable: true
	// refused: false
}
