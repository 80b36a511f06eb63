package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// transformationRules are three rules over the facts of a generated fleet:
//   - capacity, on every node, with a label that is invalid on some machines (their product name has
//     parentheses), which skips the rule there;
//   - proxmox, on nocloud machines with a Proxmox-style SMBIOS serial, overriding the providerID and the
//     zone;
//   - zoned, on nodes with a zone (the overridden one counts) whose instance type is not listed (a node
//     without an instance type matches NotIn), with a templated taint.
const transformationRules = `global:
  clusterName: e2e-rules
transformations:
  - name: capacity
    labels:
      example.com/capacity: "{{ if .Spot }}spot{{ else }}on-demand{{ end }}"
      example.com/product: '{{ replace " " "-" .ProductName }}'
    annotations:
      example.com/serial: "{{ .SerialNumber }}"
  - name: proxmox
    nodeSelector:
      - matchExpressions:
          - key: platform
            operator: In
            values: [nocloud]
          - key: SerialNumber
            operator: Regexp
            values: ["^h=.+;i=[0-9]+$"]
    platformMetadata:
      ProviderID: 'proxmox://{{ default "pve" .Region }}/{{ getValue .SerialNumber "i" }}'
      Zone: '{{ default "pve-1" .Zone }}'
    taints:
      example.com/hypervisor: "proxmox:NoSchedule"
`

const zonedRule = `  - name: zoned
    nodeSelector:
      - matchExpressions:
          - key: zone
            operator: Exists
          - key: instanceType
            operator: NotIn
            values: [m5.large, cx22, e2-standard-4]
    labels:
      example.com/zone: "{{ lower .Zone }}"
    annotations:
      example.com/provider-id: "{{ .ProviderID }}"
    taints:
      example.com/platform: "{{ .Platform }}:PreferNoSchedule"
`

// ruleExpectation is what the rules must give one machine, computed here from the simulated machine
// without talos-ccm's code.
type ruleExpectation struct {
	labels      map[string]string // the example.com/ labels
	annotations map[string]string // the example.com/ annotations
	taints      []corev1.Taint    // the example.com/ taints, sorted by key
	builtin     map[string]string // the well-known labels
	providerID  string
	skipped     bool // the capacity rule is skipped
}

var proxmoxSerial = regexp.MustCompile(`^h=.+;i=[0-9]+$`)

func expectRules(m talossim.Machine, withZoned bool) ruleExpectation {
	base := expect(m, "e2e-rules")
	out := ruleExpectation{
		labels:      map[string]string{},
		annotations: map[string]string{},
		builtin:     base.labels,
		providerID:  base.providerID,
	}

	// What the machine's Talos API says.
	platform, region, zone, instanceType, providerID, spot := m.Platform, m.Region, m.Zone, m.InstanceType, m.ProviderID, m.Spot
	if m.NoPlatformMetadata {
		platform, region, zone, instanceType, providerID, spot = "metal", "", "", "", "", false
	}

	// capacity
	product := strings.ReplaceAll(m.System.ProductName, " ", "-")
	if len(validation.IsValidLabelValue(product)) > 0 {
		out.skipped = true
	} else {
		out.labels["example.com/capacity"] = map[bool]string{true: "spot", false: "on-demand"}[spot]
		out.labels["example.com/product"] = product
		out.annotations["example.com/serial"] = m.System.SerialNumber
	}

	// proxmox
	if platform == "nocloud" && proxmoxSerial.MatchString(m.System.SerialNumber) {
		vmid := strings.TrimPrefix(m.System.SerialNumber[strings.LastIndex(m.System.SerialNumber, ";"):], ";i=")

		r := region
		if r == "" {
			r = "pve"
		}

		providerID = "proxmox://" + r + "/" + vmid
		out.providerID = providerID

		if zone == "" {
			zone = "pve-1"
		}

		out.builtin["topology.kubernetes.io/zone"] = zone
		out.taints = append(out.taints, corev1.Taint{Key: "example.com/hypervisor", Value: "proxmox", Effect: corev1.TaintEffectNoSchedule})
	}

	// zoned
	if withZoned && zone != "" && !slices.Contains([]string{"m5.large", "cx22", "e2-standard-4"}, instanceType) {
		out.labels["example.com/zone"] = strings.ToLower(zone)
		out.annotations["example.com/provider-id"] = providerID
		out.taints = append(out.taints, corev1.Taint{Key: "example.com/platform", Value: platform, Effect: corev1.TaintEffectPreferNoSchedule})
	}

	slices.SortFunc(out.taints, func(a, b corev1.Taint) int { return strings.Compare(a.Key, b.Key) })

	return out
}

// ruleOutputs is what the rules left on a Node, in the form of ruleExpectation.
func ruleOutputs(n *corev1.Node) ruleExpectation {
	out := ruleExpectation{labels: map[string]string{}, annotations: map[string]string{}, builtin: map[string]string{}, providerID: n.Spec.ProviderID}

	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, "example.com/") && k != "example.com/team":
			out.labels[k] = v
		case strings.HasPrefix(k, "topology.kubernetes.io/"), strings.HasPrefix(k, "node.cloudprovider.kubernetes.io/"),
			k == "node.kubernetes.io/instance-type":
			out.builtin[k] = v
		}
	}

	for k, v := range n.Annotations {
		if strings.HasPrefix(k, "example.com/") && k != "example.com/team" {
			out.annotations[k] = v
		}
	}

	for _, t := range n.Spec.Taints {
		if strings.HasPrefix(t.Key, "example.com/") && t.Key != "example.com/team" {
			out.taints = append(out.taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
	}

	slices.SortFunc(out.taints, func(a, b corev1.Taint) int { return strings.Compare(a.Key, b.Key) })

	return out
}

func (e ruleExpectation) matches(n *corev1.Node) bool {
	got := ruleOutputs(n)

	return maps.Equal(e.labels, got.labels) && maps.Equal(e.annotations, got.annotations) &&
		slices.Equal(e.taints, got.taints) && maps.Equal(e.builtin, got.builtin) && e.providerID == got.providerID
}

// configMapMount lays out a directory as the kubelet mounts a ConfigMap: config.yaml links through the
// ..data symlink to a timestamped directory, and every update swaps ..data atomically.
type configMapMount struct {
	dir  string
	gen  int
	path string
}

func newConfigMapMount(t *testing.T) *configMapMount {
	t.Helper()

	dir := t.TempDir()

	return &configMapMount{dir: dir, path: filepath.Join(dir, "config.yaml")}
}

func (c *configMapMount) update(t *testing.T, content string) {
	t.Helper()

	c.gen++

	data := fmt.Sprintf("..2026_11_21_06_00_%02d.%d", c.gen, c.gen)
	require.NoError(t, os.Mkdir(filepath.Join(c.dir, data), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, data, "config.yaml"), []byte(content), 0o644))

	tmp := filepath.Join(c.dir, "..data_tmp")
	require.NoError(t, os.Symlink(data, tmp))
	require.NoError(t, os.Rename(tmp, filepath.Join(c.dir, "..data")))

	if _, err := os.Lstat(c.path); errors.Is(err, os.ErrNotExist) {
		require.NoError(t, os.Symlink(filepath.Join("..data", "config.yaml"), c.path))
	}
}

func reloadFailures(t *testing.T) float64 {
	t.Helper()

	var m dto.Metric

	require.NoError(t, metrics.ConfigReloadFailures.Write(&m))

	return m.GetCounter().GetValue()
}

// waitRules waits until every machine's Node shows exactly what the rules must give it.
func waitRules(t *testing.T, machines []talossim.Machine, withZoned bool, timeout time.Duration) {
	t.Helper()

	testenv.Eventually(t, timeout, 200*time.Millisecond, "every Node shows the rules' output", rulesShown(machines, withZoned))
}

// rulesShown is a check that every machine's Node is initialized and shows exactly what the rules must give
// it; its error shows what the first Node that does not has instead.
func rulesShown(machines []talossim.Machine, withZoned bool) func(context.Context) error {
	want := map[string]ruleExpectation{}
	for _, m := range machines {
		want[m.Name] = expectRules(m, withZoned)
	}

	return func(ctx context.Context) error {
		var first *corev1.Node

		err := testenv.Every(names(machines), func(name string) error {
			n, err := env.Clientset().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			switch {
			case err != nil:
				return err
			case !initialized(n):
				return errors.New("not initialized")
			case !want[name].matches(n):
				if first == nil {
					first = n
				}

				return errors.New("not as expected")
			default:
				return nil
			}
		})
		if err != nil && first != nil {
			return fmt.Errorf("%w; %s shows %+v, want %+v", err, first.Name, ruleOutputs(first), want[first.Name])
		}

		return err
	}
}

// waitOneEvent waits until exactly one Event of the namespace ("" for all) matches the field selector, and it
// is of eventType (any when "") and its message contains message.
func waitOneEvent(t *testing.T, namespace, selector, eventType, message string) {
	t.Helper()

	testenv.Eventually(t, 10*time.Second, 200*time.Millisecond, "one Event "+selector+" saying "+message, func(ctx context.Context) error {
		events, err := env.Clientset().CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return err
		}

		if len(events.Items) != 1 {
			return fmt.Errorf("%d Events", len(events.Items))
		}

		if e := events.Items[0]; (eventType != "" && e.Type != eventType) || !strings.Contains(e.Message, message) {
			return fmt.Errorf("%s Event saying %q", e.Type, e.Message)
		}

		return nil
	})
}

func TestTransformationRules(t *testing.T) {
	machines := fleet("rules", 20, 42)

	// Proxmox writes the VM ID into the SMBIOS serial number of its nocloud VMs.
	for i := range machines {
		if machines[i].Platform == "nocloud" {
			machines[i].System.SerialNumber = fmt.Sprintf("h=%s;i=%d", machines[i].Name, 100+i)
		}
	}

	// The test means something only if every rule applies somewhere and is left out somewhere.
	var skipped, proxmox, zoned, notZoned int

	for _, m := range machines {
		e := expectRules(m, true)
		if e.skipped {
			skipped++
		}

		if strings.HasPrefix(e.providerID, "proxmox://") {
			proxmox++
		}

		if _, ok := e.labels["example.com/zone"]; ok {
			zoned++
		} else {
			notZoned++
		}
	}

	require.Positive(t, skipped, "a node where the capacity rule is skipped")
	require.Less(t, skipped, len(machines))
	require.Positive(t, proxmox, "a Proxmox node")
	require.Positive(t, zoned, "a zoned node")
	require.Positive(t, notZoned, "a node that is not zoned")

	sim, srv := talossim.StartTest(t, machines)

	mount := newConfigMapMount(t)
	mount.update(t, transformationRules+zonedRule)

	instance := startCCM(t, srv, app.Options{ConfigFile: mount.path, PodNamespace: "default", PodName: "talos-ccm-rules-e2e"})

	joinNodes(t, machines)

	waitRules(t, machines, true, 60*time.Second)

	// A skipped rule is a Warning Event on its Node, once.
	for _, m := range machines {
		if !expectRules(m, true).skipped {
			continue
		}

		waitOneEvent(t, "", "involvedObject.kind=Node,involvedObject.name="+m.Name+",reason=TransformationRuleSkipped",
			corev1.EventTypeWarning, `transformation rule capacity skipped: label "example.com/product"`)
	}

	// A changed fact reaches the Node within seconds when the machine changes: a zoned machine moves, and
	// as a moved machine does, its addresses change (PlatformMetadata, which Talos sets at boot, is read
	// again after an address change, not watched).
	var moved int

	for i, m := range machines {
		if _, ok := expectRules(m, true).labels["example.com/zone"]; ok && m.Platform != "nocloud" {
			moved = i

			break
		}
	}

	changed := time.Now()

	require.NoError(t, sim.UpdateMachine(machines[moved].Name, func(m *talossim.Machine) { m.Zone = "Moved-Zone-9" }))
	machines[moved].Zone = "Moved-Zone-9"

	linkLocal := talossim.Address{LinkName: "dummy0", Prefix: netip.MustParsePrefix("fe80::9/64"), Scope: "link"}
	require.NoError(t, sim.SetAddresses(machines[moved].Name, append(slices.Clone(machines[moved].Addresses), linkLocal)))

	waitRules(t, machines, true, 15*time.Second)
	t.Logf("a changed fact reached the Node in %s", time.Since(changed).Round(time.Millisecond))

	// An operator's own label, annotation and taint, on a node that the dropped rule changes.
	operated := machines[moved].Name

	n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), operated, metav1.GetOptions{})
	require.NoError(t, err)

	n.Labels["example.com/team"] = "storage"
	n.Annotations["example.com/team"] = "storage"
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "example.com/team", Value: "storage", Effect: corev1.TaintEffectNoSchedule})

	_, err = env.Clientset().CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{FieldManager: "operator"})
	require.NoError(t, err)

	// Dropping a rule removes what it set, and only that.
	changed = time.Now()

	mount.update(t, transformationRules)
	waitRules(t, machines, false, 15*time.Second)
	t.Logf("a dropped rule left every Node in %s", time.Since(changed).Round(time.Millisecond))

	n, err = env.Clientset().CoreV1().Nodes().Get(t.Context(), operated, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "storage", n.Labels["example.com/team"], "the operator's label stays")
	assert.Equal(t, "storage", n.Annotations["example.com/team"], "the operator's annotation stays")
	assert.Contains(t, n.Spec.Taints, corev1.Taint{Key: "example.com/team", Value: "storage", Effect: corev1.TaintEffectNoSchedule}, "the operator's taint stays")

	// An invalid edit changes nothing: it is counted, reported on the Pod, and the last good config stays.
	failures := reloadFailures(t)

	// The invalid edit is logged as an error on purpose; errors at any other step fail the test.
	invalidEditDone := instance.expectErrors("an invalid edit of the config file is rejected")

	valid := transformationRules + zonedRule
	mount.update(t, valid+"  - name: broken\n    nodeSelector:\n      - matchExpressions:\n          - {key: hostname, operator: Regexp, values: [\"^web-[\"]}\n    labels: {a: b}\n")

	// The bad expression is on the fourth line of the broken rule.
	badLine := strings.Count(valid, "\n") + 4

	testenv.Eventually(t, 10*time.Second, 100*time.Millisecond, "the rejected config counted", func(context.Context) error {
		if got := reloadFailures(t); got != failures+1 {
			return fmt.Errorf("%v reload failures, want %v", got, failures+1)
		}

		return nil
	})
	waitOneEvent(t, "default", "involvedObject.kind=Pod,involvedObject.name=talos-ccm-rules-e2e,reason=ConfigRejected",
		"", fmt.Sprintf("%s:%d: rule \"broken\": nodeSelector[0].matchExpressions[0]: invalid regular expression", mount.path, badLine))

	// Rejected, the edit changes nothing on the Nodes, however long one waits.
	testenv.Consistently(t, 2*time.Second, 200*time.Millisecond, "the last good config stays", rulesShown(machines, false))
	invalidEditDone()

	// A valid edit after an invalid one applies again.
	mount.update(t, transformationRules+zonedRule)
	waitRules(t, machines, true, 15*time.Second)
	assert.Equal(t, failures+1, reloadFailures(t))
}
