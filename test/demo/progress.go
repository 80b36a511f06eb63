package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const uninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"

// watchProgress prints "initialized / total" as it changes, until every one of want Nodes is initialized.
func watchProgress(ctx context.Context, client kubernetes.Interface, want int, children []*process) ([]corev1.Node, error) {
	started := time.Now()
	last := ""

	for {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}

			return nil, fmt.Errorf("failed to list nodes: %w", err)
		}

		done := 0

		for i := range list.Items {
			if isInitialized(&list.Items[i]) {
				done++
			}
		}

		line := fmt.Sprintf("    initialized %d / %d nodes (%d registered)", done, want, len(list.Items))
		if line != last {
			fmt.Printf("%s  [%s]\n", line, time.Since(started).Round(100*time.Millisecond))
			last = line
		}

		if done >= want {
			fmt.Printf("==> all %d nodes initialized in %s\n\n", want, time.Since(started).Round(100*time.Millisecond))

			return list.Items, nil
		}

		for _, p := range children {
			select {
			case <-p.exited:
				return nil, fmt.Errorf("%s exited early", p.name)
			default:
			}
		}

		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func isInitialized(n *corev1.Node) bool {
	return !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == uninitializedTaint })
}

// printTable prints the Nodes with what talos-ccm set on them.
func printTable(out io.Writer, nodes []corev1.Node) {
	slices.SortFunc(nodes, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })

	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tPROVIDER ID\tPLATFORM\tREGION\tZONE\tINSTANCE TYPE\tADDRESSES")

	for _, n := range nodes {
		var addrs []string
		for _, a := range n.Status.Addresses {
			addrs = append(addrs, string(a.Type)+"="+a.Address)
		}

		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			n.Name, n.Spec.ProviderID,
			dash(n.Labels["node.cloudprovider.kubernetes.io/platform"]),
			dash(n.Labels["topology.kubernetes.io/region"]),
			dash(n.Labels["topology.kubernetes.io/zone"]),
			dash(n.Labels["node.kubernetes.io/instance-type"]),
			strings.Join(addrs, ","),
		)
	}

	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}

	return s
}
