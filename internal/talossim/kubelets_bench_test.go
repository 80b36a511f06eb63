package talossim_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// BenchmarkKubeletsRegister registers the Nodes of 5,000 machines (create and Ready status: two
// writes each) with the default options, and reports the write rate reached.
func BenchmarkKubeletsRegister(b *testing.B) {
	const count = 5000

	env := testenv.Start(b)

	for i := 0; b.Loop(); i++ {
		machines := talossim.Generate(count, int64(i))
		for j := range machines {
			machines[j].Name = fmt.Sprintf("b%d-%s", i, machines[j].Name)
		}

		kubelets, err := talossim.NewKubelets(env.Config, machines, talossim.KubeletOptions{})
		require.NoError(b, err)

		ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
		done := make(chan error, 1)
		start := time.Now()

		go func() { done <- kubelets.Run(ctx) }()

		select {
		case <-kubelets.Registered():
		case <-ctx.Done():
			b.Fatal("timeout")
		}

		took := time.Since(start)

		cancel()
		require.NoError(b, <-done)

		b.ReportMetric(float64(2*count)/took.Seconds(), "writes/s")
		b.ReportMetric(took.Seconds(), "s/fleet")

		list, err := env.Clientset().CoreV1().Nodes().List(b.Context(), metav1.ListOptions{ResourceVersion: "0"})
		require.NoError(b, err)
		require.GreaterOrEqual(b, len(list.Items), count)
	}
}
