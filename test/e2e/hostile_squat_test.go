package e2e_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	noderes "github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// squatVictimWithin bounds the time from the victim's registration to its initialization and to the
// approval of its serving certificate, with a squatter in place: a few seconds without load.
const squatVictimWithin = 20 * time.Second

// TestAttackSquatProviderID: a kubelet credential registers its own Node (with its own machine behind it)
// without the uninitialized taint and with the providerID the victim's machine will be given, before the
// victim joins: on metal, talos://metal/<IP> is predictable. The providerID in a Node's spec is its
// kubelet's claim, so the squatter holds nothing of it: the victim is initialized with its providerID and
// its serving certificate approved within seconds, and the squatter is reported in conflict.
func TestAttackSquatProviderID(t *testing.T) {
	const prefix = "idsquat"

	machines := fleet(prefix, len(talossim.Platforms), 65)
	metal := slices.IndexFunc(machines, func(m talossim.Machine) bool { return m.Platform == "metal" })
	require.GreaterOrEqual(t, metal, 0, "every run of seven machines has a metal one")

	victim, own := machines[metal], machines[(metal+1)%len(machines)]

	// The victim is the control-plane machine too: its ControllerManagerConfig gives the Service ranges
	// that the certificate checks need.
	victim.ControlPlane = true

	_, srv := talossim.StartTest(t, []talossim.Machine{victim, own})
	socket := filepath.Join(socketDir(t), "ccm.sock")
	startCCM(t, srv, app.Options{APIListen: socket})
	st := stateClient(t, socket)

	victimID := expect(victim, talossim.DefaultClusterName).providerID
	ownID := expect(own, talossim.DefaultClusterName).providerID
	require.True(t, strings.HasPrefix(victimID, "talos://metal/"), "the victim's providerID is the predictable fallback: %s", victimID)

	registerSquatter(t, own, victimID)

	// The squatter is bound to its own machine before the victim joins: its claim is seen first.
	testenv.Eventually(t, outcomeTimeout, 100*time.Millisecond, "the squatter bound to its own machine", func(ctx context.Context) error {
		// Read directly: talos-ccm's state API may not answer yet.
		nt, err := safe.StateGetByID[*noderes.NodeTransform](ctx, st, own.Name)
		if err != nil {
			return err
		}

		if id := nt.TypedSpec().Value.GetProviderId(); id != ownID {
			return fmt.Errorf("NodeTransform providerID %q", id)
		}

		return nil
	})

	kubelets := joinNodes(t, []talossim.Machine{victim})
	waitNodes(t, []string{victim.Name}, squatVictimWithin, initialized)

	request := kubeletRequests(t, kubelets, []string{victim.Name}, outcomeTimeout)[victim.Name]
	cond := waitCSRDecided(t, request, outcomeTimeout)
	require.Equal(t, certificatesv1.CertificateApproved, cond.Type, "the victim's request: %s", cond.Message)

	times, _ := kubelets.Times(victim.Name)
	assert.WithinDuration(t, times.Created, cond.LastUpdateTime.Time, squatVictimWithin,
		"the victim's serving certificate approved within %s of its registration", squatVictimWithin)

	assertVictimIntact(t, kubelets, victim)

	// The squatter keeps the providerID it registered with (a providerID never changes), is in conflict,
	// and keeps what its own machine gives.
	waitAttackOutcome(t, st, own.Name, hasConflict, func(*corev1.Node) bool { return false })

	nt := nodeTransform(t, st, own.Name)
	assert.Contains(t, nt.Conflict, victimID, "NodeTransform %s: conflict must name the providerID it carries", own.Name)
	assert.Equal(t, ownID, nt.ProviderID, "NodeTransform %s: its own machine's providerID", own.Name)
	assert.True(t, nt.Initialize, "NodeTransform %s: it keeps what its own machine gives", own.Name)
	assert.Equal(t, victimID, getNode(t, own.Name).Spec.ProviderID)

	assertEvent(t, own.Name, machineIdentityConflict)
}

// registerSquatter creates the machine's Node as its kubelet may: pointing at its own machine, without the
// uninitialized taint, and with providerID; it is deleted when the test ends.
func registerSquatter(t *testing.T, m talossim.Machine, providerID string) {
	t.Helper()

	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        m.Name,
			Labels:      map[string]string{corev1.LabelHostname: m.Name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"},
			Annotations: map[string]string{kubekeys.AnnotationProvidedNodeIP: providedNodeIP(m)},
		},
		Spec: corev1.NodeSpec{ProviderID: providerID},
	}

	_, err := kubeletClientset(t, m.Name).CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{})
	require.NoError(t, err, "a kubelet may register its Node with any providerID")

	t.Cleanup(func() {
		_ = env.Clientset().CoreV1().Nodes().Delete(context.Background(), m.Name, metav1.DeleteOptions{})
	})
}
