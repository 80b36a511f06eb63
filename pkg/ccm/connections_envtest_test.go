package ccm_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
	"github.com/talos-ccm/talos-ccm/pkg/ccm"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

// uninitializedTaint is the taint a kubelet of an external cloud provider registers its Node with.
const uninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"

// machineFacts is a host's controller that feeds the facts of its machines to the pipeline, once.
type machineFacts struct {
	machines []factsv1.Machine
}

func (ctrl *machineFacts) Name() string { return "host.MachineFacts" }

func (ctrl *machineFacts) Inputs() []controller.Input { return nil }

func (ctrl *machineFacts) Outputs() []controller.Output { return factsv1.Outputs() }

func (ctrl *machineFacts) Run(ctx context.Context, r controller.Runtime, _ *zap.Logger) error {
	select {
	case <-ctx.Done():
		return nil
	case <-r.EventCh():
	}

	if err := factsv1.Sync(ctx, r, ccm.TalosNamespace, ctrl.machines); err != nil {
		return fmt.Errorf("failed to feed the facts: %w", err)
	}

	<-ctx.Done()

	return nil
}

// dialCounter counts the connections dialled through it, and those still open.
type dialCounter struct {
	dialled, open atomic.Int64
}

// config returns a copy of cfg whose connections are counted.
func (d *dialCounter) config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	dialer := &net.Dialer{Timeout: 30 * time.Second}

	cfg.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := dialer.DialContext(ctx, network, address)
		if err != nil {
			return nil, err //nolint:wrapcheck // A dialer's own error.
		}

		d.dialled.Add(1)
		d.open.Add(1)

		return &countedConn{Conn: conn, open: &d.open}, nil
	}

	return cfg
}

// countedConn leaves the count of open connections once closed.
type countedConn struct {
	net.Conn

	open *atomic.Int64
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })

	return c.Conn.Close() //nolint:wrapcheck // The connection's own error.
}

// TestSharedConnection: a pipeline that initializes a Node (its Node and certificate request informers
// list and watch, its Node writer writes) keeps one connection per client open, at least three, and one
// in all with Options.SharedConnection; Close closes every one of them.
//
// The informers of a shared connection start together, before it exists: each of their first requests
// dials, and the HTTP/2 transport keeps the first connection and closes the others once their TLS
// handshake is over, so a shared pipeline dials up to three times and keeps one.
func TestSharedConnection(t *testing.T) {
	t.Parallel()

	env := testenv.Start(t)

	for _, tc := range []struct {
		name   string
		shared bool
		// atLeast and atMost bound the connections open once the Node is initialized.
		atLeast, atMost int64
	}{
		{name: "a connection per client", atLeast: 3, atMost: 6},
		{name: "one shared connection", shared: true, atLeast: 1, atMost: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()

			var conns dialCounter

			name := fmt.Sprintf("shared-%t", tc.shared)
			pipeline, err := ccm.New(ctx, nil, ccm.Options{
				RestConfig:       conns.config(env.Config),
				Logger:           zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
				HostFacts:        true,
				NodeSelector:     "test=" + name,
				SharedConnection: tc.shared,
			})
			require.NoError(t, err)

			require.NoError(t, pipeline.Runtime().RegisterController(&machineFacts{machines: []factsv1.Machine{{
				NodeName: name, Platform: "metal", NodeIPs: []string{"10.0.0.1"}, Addresses: []factsv1.Address{{Address: "10.0.0.1/24"}},
			}}}))

			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)

			go func() { done <- pipeline.Run(runCtx) }()

			_, err = env.Clientset().CoreV1().Nodes().Create(ctx, &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"test": name}},
				Spec: corev1.NodeSpec{Taints: []corev1.Taint{{
					Key: uninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule,
				}}},
			}, metav1.CreateOptions{})
			require.NoError(t, err)

			testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "the Node initialized", func(ctx context.Context) error {
				n, err := env.Clientset().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err //nolint:wrapcheck
				}

				for _, taint := range n.Spec.Taints {
					if taint.Key == uninitializedTaint {
						return errors.New("still uninitialized")
					}
				}

				return nil
			})

			// A connection the transport does not keep is closed on a goroutine of its own, which tells no
			// one: a poll of the count is the only wait.
			testenv.Eventually(t, 10*time.Second, 10*time.Millisecond, "the connections kept", func(context.Context) error {
				if open := conns.open.Load(); open < tc.atLeast || open > tc.atMost {
					return fmt.Errorf("%d connections open, want %d to %d", open, tc.atLeast, tc.atMost)
				}

				return nil
			})

			t.Logf("connections open: %d, dialled: %d", conns.open.Load(), conns.dialled.Load())

			stop()
			require.NoError(t, <-done)
			pipeline.Close()

			assert.Zero(t, conns.open.Load(), "every connection is closed once the pipeline is")
		})
	}
}
