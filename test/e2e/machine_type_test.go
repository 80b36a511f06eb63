package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// machineTypeRules label the control plane and the workers by the machineType fact, without a hostname
// pattern, and copy the fact into an annotation through its template field.
const machineTypeRules = `transformations:
  - name: control-plane
    nodeSelector:
      - matchExpressions:
          - {key: machineType, operator: In, values: [controlplane]}
    labels: {node-role.kubernetes.io/control-plane: ""}
  - name: workers
    nodeSelector:
      - matchExpressions:
          - {key: machineType, operator: In, values: [worker]}
    labels: {node-role.kubernetes.io/worker: ""}
  - name: type
    annotations: {example.com/machine-type: "{{ .MachineType }}"}
`

// TestMachineTypeSelector runs rules that select on the machine type that the simulator's Talos API
// serves (MachineTypes.config.talos.dev): a control-plane machine (Talos's init machine is one too), a
// worker, and a machine whose Talos publishes no MachineType, which is initialized without either role.
// The control-plane machines are not marked ControlPlane in the simulator, so that the role label can come
// from talos-ccm's rule only (the simulated kubelets label ControlPlane machines' Nodes themselves).
func TestMachineTypeSelector(t *testing.T) {
	machines := []talossim.Machine{
		dropinMachine("mtype-cp-1", 21),
		dropinMachine("mtype-init-1", 22),
		dropinMachine("mtype-worker-1", 23),
		dropinMachine("mtype-none-1", 24),
	}
	machines[0].MachineType = "controlplane"
	machines[1].MachineType = "init"
	machines[3].NoMachineType = true

	_, srv := talossim.StartTest(t, machines)

	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(machineTypeRules), 0o600))

	startCCM(t, srv, app.Options{ConfigFile: path})
	joinNodes(t, machines)

	want := map[string]struct{ role, annotation string }{
		"mtype-cp-1":     {"node-role.kubernetes.io/control-plane", "controlplane"},
		"mtype-init-1":   {"node-role.kubernetes.io/control-plane", "controlplane"},
		"mtype-worker-1": {"node-role.kubernetes.io/worker", "worker"},
		"mtype-none-1":   {},
	}

	testenv.Eventually(t, 60*time.Second, 200*time.Millisecond, "Nodes labeled by their machine type", func(ctx context.Context) error {
		return testenv.Every(names(machines), func(name string) error {
			n, err := env.Clientset().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}

			if !initialized(n) {
				return errNotYet
			}

			w := want[name]
			if w.role != "" {
				if _, ok := n.Labels[w.role]; !ok {
					return fmt.Errorf("no %s label yet: %w", w.role, errNotYet)
				}
			}

			if n.Annotations["example.com/machine-type"] != w.annotation {
				return fmt.Errorf("machine-type annotation %q: %w", n.Annotations["example.com/machine-type"], errNotYet)
			}

			return nil
		})
	})

	// Each Node has its own role only; the machine without a MachineType has neither.
	for _, m := range machines {
		n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), m.Name, metav1.GetOptions{})
		require.NoError(t, err)

		var roles []string

		for _, role := range []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/worker"} {
			if _, ok := n.Labels[role]; ok {
				roles = append(roles, role)
			}
		}

		if w := want[m.Name]; w.role != "" {
			assert.Equal(t, []string{w.role}, roles, m.Name)
		} else {
			assert.Empty(t, roles, m.Name)
		}
	}
}
