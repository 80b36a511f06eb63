package testenv_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// TestStart runs the control plane the end-to-end tests rely on through every feature they use,
// then checks that stopping it leaves no process behind. Its steps share one control plane, so
// the test does not run in parallel with others that would start processes of their own.
func TestStart(t *testing.T) {
	env := testenv.Start(t)

	before := controlPlaneProcesses(t)
	if runtime.GOOS == "linux" {
		require.Len(t, before, 2, "expected etcd and kube-apiserver as children of the test: %v", before)
		assertAPIServerFlags(t, before)
	}

	t.Run("node", func(t *testing.T) {
		testNode(t, env.Clientset())
	})

	t.Run("kubelet serving CSR", func(t *testing.T) {
		testKubeletServingCSR(t, env)
	})

	t.Run("kubeconfig", func(t *testing.T) {
		testKubeconfig(t, env)
	})

	t.Run("node restriction", func(t *testing.T) {
		testNodeRestriction(t, env)
	})

	require.NoError(t, env.Stop())
	require.NoError(t, env.Stop(), "a second stop must be harmless, t.Cleanup calls it again")

	for pid, cmdline := range before {
		_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
		assert.True(t, os.IsNotExist(err), "process %d (%s) is still running after stop", pid, cmdline[0])
	}

	assert.Empty(t, controlPlaneProcesses(t), "control plane processes remain after stop")
}

// testNode creates a Node and reads it back.
func testNode(t *testing.T, clientset kubernetes.Interface) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "foo",
			Labels: map[string]string{"tccm.dev/test": "node"},
		},
		Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{{
				Key:    kubekeys.TaintUninitialized,
				Value:  "true",
				Effect: corev1.TaintEffectNoSchedule,
			}},
		},
	}

	created, err := clientset.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, created.UID)

	got, err := clientset.CoreV1().Nodes().Get(t.Context(), "foo", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, created.UID, got.UID)
	assert.Equal(t, "node", got.Labels["tccm.dev/test"])
	// The TaintNodesByCondition admission plugin adds node.kubernetes.io/not-ready as well.
	assert.Contains(t, got.Spec.Taints, node.Spec.Taints[0])
}

// testKubeletServingCSR submits a kubelet serving CSR as the node identity system:node:foo, by
// impersonation, and checks that the apiserver recorded that identity as the requester.
func testKubeletServingCSR(t *testing.T, env *testenv.Env) {
	const (
		nodeUser  = "system:node:foo"
		nodeGroup = "system:nodes"
	)

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)

	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: nodeUser, Organization: []string{nodeGroup}},
		DNSNames:    []string{"foo"},
		IPAddresses: []net.IP{net.ParseIP("10.5.0.2")},
	}, key)
	require.NoError(t, err)

	nodeConfig := rest.CopyConfig(env.Config)
	nodeConfig.Impersonate = rest.ImpersonationConfig{UserName: nodeUser, Groups: []string{nodeGroup}}

	nodeClient, err := kubernetes.NewForConfig(nodeConfig)
	require.NoError(t, err)

	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages: []certificatesv1.KeyUsage{
				certificatesv1.UsageDigitalSignature,
				certificatesv1.UsageServerAuth,
			},
			// The apiserver overwrites whatever the client claims with the authenticated identity.
			Username: "system:admin",
		},
	}

	created, err := nodeClient.CertificatesV1().CertificateSigningRequests().Create(t.Context(), csr, metav1.CreateOptions{})
	require.NoError(t, err)

	got, err := env.Clientset().CertificatesV1().CertificateSigningRequests().Get(t.Context(), created.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, nodeUser, got.Spec.Username)
	assert.Contains(t, got.Spec.Groups, nodeGroup)
	assert.Contains(t, got.Spec.Groups, "system:authenticated")
	assert.Equal(t, certificatesv1.KubeletServingSignerName, got.Spec.SignerName)
	assert.Equal(t, csr.Spec.Request, got.Spec.Request)
}

// testNodeRestriction checks that a kubelet identity is held to its own Node, as the Node authorizer and
// the NodeRestriction admission plugin hold it in a real cluster.
func testNodeRestriction(t *testing.T, env *testenv.Env) {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:bar", Groups: []string{"system:nodes", "system:authenticated"}}

	kubelet, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	nodes := kubelet.CoreV1().Nodes()
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}

	_, err = nodes.Create(t.Context(), node("baz", nil), metav1.CreateOptions{})
	require.Error(t, err, "a node may not create another node's Node")

	_, err = nodes.Create(t.Context(), node("bar", map[string]string{"node-role.kubernetes.io/control-plane": ""}), metav1.CreateOptions{})
	require.Error(t, err, "a node may not give itself a role")

	created, err := nodes.Create(t.Context(), node("bar", map[string]string{corev1.LabelHostname: "bar"}), metav1.CreateOptions{})
	require.NoError(t, err, "a node may create its own Node")

	created.Spec.Taints = []corev1.Taint{{Key: "example.com/mine", Effect: corev1.TaintEffectNoSchedule}}
	_, err = nodes.Update(t.Context(), created, metav1.UpdateOptions{})
	require.Error(t, err, "a node may not change its own taints")

	_, err = nodes.Get(t.Context(), "foo", metav1.GetOptions{})
	require.Error(t, err, "a node may not read another node's Node")

	foo, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), "foo", metav1.GetOptions{})
	require.NoError(t, err)

	foo.Labels["example.com/stolen"] = "true"
	_, err = nodes.Update(t.Context(), foo, metav1.UpdateOptions{})
	require.Error(t, err, "a node may not update another node's Node")
}

// testKubeconfig checks that the written kubeconfig gives another client admin access.
func testKubeconfig(t *testing.T, env *testenv.Env) {
	cfg, err := clientcmd.BuildConfigFromFlags("", env.KubeconfigFile(t))
	require.NoError(t, err)

	clientset, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	node, err := clientset.CoreV1().Nodes().Get(t.Context(), "foo", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "foo", node.Name)

	review, err := clientset.AuthenticationV1().SelfSubjectReviews().Create(t.Context(),
		&authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "admin", review.Status.UserInfo.Username)
	assert.Contains(t, review.Status.UserInfo.Groups, "system:masters")
}

// assertAPIServerFlags checks the flags the running kube-apiserver got.
func assertAPIServerFlags(t *testing.T, procs map[int][]string) {
	for _, cmdline := range procs {
		if filepath.Base(cmdline[0]) != "kube-apiserver" {
			continue
		}

		for _, flag := range []string{
			"--max-requests-inflight=3000",
			"--max-mutating-requests-inflight=1500",
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
		} {
			assert.True(t, slices.Contains(cmdline, flag), "kube-apiserver runs without %s: %v", flag, cmdline)
		}

		return
	}

	t.Errorf("no kube-apiserver among %v", procs)
}

// controlPlaneProcesses returns the command lines of the running etcd and kube-apiserver processes
// started by this test binary, by PID. It finds none but on Linux.
func controlPlaneProcesses(t *testing.T) map[int][]string {
	procs := map[int][]string{}

	if runtime.GOOS != "linux" {
		return procs
	}

	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)

	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil {
			continue
		}

		// Processes come and go while this reads: one that vanished is not ours to report.
		stat, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "stat"))
		if err != nil || parentPID(string(stat)) != os.Getpid() {
			continue
		}

		raw, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "cmdline"))
		if err != nil {
			continue
		}

		cmdline := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if name := filepath.Base(cmdline[0]); name == "etcd" || name == "kube-apiserver" {
			procs[pid] = cmdline
		}
	}

	return procs
}

// parentPID extracts the parent PID from /proc/PID/stat, whose second field (the command name, in
// parentheses) may itself hold spaces and parentheses.
func parentPID(stat string) int {
	fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
	if len(fields) < 2 {
		return -1
	}

	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return -1
	}

	return ppid
}
