package kubeclient_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/reference"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// The Scheme names the kind of every object talos-ccm posts Events about (the event recorder needs it): Nodes,
// certificate requests, Services, and the Pod the config file's Events go to.
func TestSchemeNamesEventObjects(t *testing.T) {
	t.Parallel()

	for _, obj := range []runtime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
		&certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "csr-1"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "talos-ccm-0", Namespace: "kube-system"}},
	} {
		ref, err := reference.GetReference(kubeclient.Scheme, obj)
		require.NoError(t, err, "%T", obj)
		assert.NotEmpty(t, ref.Kind, "%T", obj)
		assert.NotEmpty(t, ref.APIVersion, "%T", obj)
	}
}

// protobufConfig is the admin's configuration speaking protobuf, as every client of talos-ccm does.
func protobufConfig(env *testenv.Env) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON

	return cfg
}

// startInformers starts informers until the test ends, and waits for their caches.
func startInformers(t *testing.T, informers *kubeclient.Informers) {
	t.Helper()

	ctx, cancel := context.WithCancel(context.Background())

	t.Cleanup(func() {
		cancel()
		informers.Shutdown()
	})

	informers.Start(ctx)

	syncCtx, stop := context.WithTimeout(t.Context(), 30*time.Second)
	defer stop()

	require.True(t, informers.WaitForCacheSync(syncCtx), "informers synced")
}

// Every resource and verb talos-ccm uses, through its clients and informers, against a real apiserver in
// protobuf: the writes land, and the informers' caches follow them.
func TestClientAgainstAPIServer(t *testing.T) {
	t.Parallel()

	env, client := sharedClient(t)

	informers := kubeclient.NewInformers(client)
	informers.Nodes()
	informers.CertificateSigningRequests()
	informers.Services()
	namespaces := informers.Namespaces()
	apiServer := informers.For("apiserver", func(c *kubeclient.Client) *kubeclient.InlineInformer {
		return kubeclient.NewInformer(c.EndpointSlices("default"), &discoveryv1.EndpointSlice{}, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", "kubernetes").String()
		}, nil)
	})

	startInformers(t, informers)

	ctx := t.Context()

	t.Run("nodes", func(t *testing.T) {
		_, err := client.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kubeclient-n1"}}, metav1.CreateOptions{})
		require.NoError(t, err)

		_, err = client.Nodes().Patch(ctx, "kubeclient-n1", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)

		_, err = client.Nodes().Patch(ctx, "kubeclient-n1", types.MergePatchType,
			[]byte(`{"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.1"}]}}`), metav1.PatchOptions{}, "status")
		require.NoError(t, err)

		eventually(t, "the Node in the informer cache", func() error {
			n, err := informers.NodeLister().Get("kubeclient-n1")
			if err != nil {
				return err
			}

			if n.Labels["a"] != "b" || len(n.Status.Addresses) != 1 {
				return fmt.Errorf("labels %v, addresses %v", n.Labels, n.Status.Addresses)
			}

			return nil
		})

		n, err := client.Nodes().Get(ctx, "kubeclient-n1", metav1.GetOptions{})
		require.NoError(t, err)

		n.Spec.ProviderID = "talos://metal/10.0.0.1"
		_, err = client.Nodes().Update(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)

		require.NoError(t, client.Nodes().Delete(ctx, "kubeclient-n1", metav1.DeleteOptions{}))
	})

	t.Run("certificate requests", func(t *testing.T) {
		csr := &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "kubeclient-csr"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    certificateRequest(t),
				SignerName: "example.com/test",
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature},
			},
		}

		created, err := env.Clientset().CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
		require.NoError(t, err)

		created.Status.Conditions = append(created.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test", Message: "approved by the test",
		})

		_, err = client.CertificateSigningRequests().UpdateApproval(ctx, created.Name, created, metav1.UpdateOptions{})
		require.NoError(t, err)

		eventually(t, "the approved request in the informer cache", func() error {
			got, err := informers.CertificateSigningRequestLister().Get(created.Name)
			if err != nil {
				return err
			}

			for _, c := range got.Status.Conditions {
				if c.Type == certificatesv1.CertificateApproved {
					return nil
				}
			}

			return errors.New("not approved")
		})
	})

	t.Run("services", func(t *testing.T) {
		_, err := client.Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "kubeclient-web"},
			Spec: corev1.ServiceSpec{
				Type:  corev1.ServiceTypeLoadBalancer,
				Ports: []corev1.ServicePort{{Port: 80}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)

		_, err = client.Services("default").Patch(ctx, "kubeclient-web", types.MergePatchType,
			[]byte(`{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.10"}]}}}`), metav1.PatchOptions{}, "status")
		require.NoError(t, err)

		eventually(t, "the Service's ingress in the informer cache", func() error {
			svc, err := informers.ServiceLister().Services("default").Get("kubeclient-web")
			if err != nil {
				return err
			}

			if len(svc.Status.LoadBalancer.Ingress) != 1 {
				return fmt.Errorf("ingress %v", svc.Status.LoadBalancer.Ingress)
			}

			return nil
		})
	})

	t.Run("namespaces", func(t *testing.T) {
		_, err := env.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: "kubeclient-team", Labels: map[string]string{"team": "a"}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)

		_, err = env.Clientset().CoreV1().Namespaces().Patch(ctx, "kubeclient-team", types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"team":"b"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)

		eventually(t, "the Namespace's labels in the informer cache", func() error {
			obj, ok, err := namespaces.GetStore().GetByKey("kubeclient-team")
			if err != nil {
				return err
			}

			if !ok {
				return errors.New("not in the cache")
			}

			if team := obj.(*corev1.Namespace).Labels["team"]; team != "b" {
				return fmt.Errorf("team %q", team)
			}

			return nil
		})
	})

	t.Run("apiserver endpoints", func(t *testing.T) {
		eventually(t, "the apiserver's EndpointSlice, alone", func() error {
			items := apiServer.GetStore().List()
			if len(items) != 1 || items[0].(*discoveryv1.EndpointSlice).Name != "kubernetes" {
				return fmt.Errorf("%d slices", len(items))
			}

			return nil
		})
	})

	t.Run("events", func(t *testing.T) {
		events := client.Events("default")
		event := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "kubeclient-n1.1", Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "kubeclient-n1"},
			Reason:         "Test",
			Message:        "posted by the test",
			Count:          1,
			Type:           corev1.EventTypeNormal,
		}

		created, err := events.Create(ctx, event, metav1.CreateOptions{})
		require.NoError(t, err)

		_, err = events.Patch(ctx, created.Name, types.MergePatchType, []byte(`{"count":2}`), metav1.PatchOptions{})
		require.NoError(t, err)

		got, err := env.Clientset().CoreV1().Events("default").Get(ctx, event.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, int32(2), got.Count)
	})

	t.Run("reviews", func(t *testing.T) {
		tokens, err := client.TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: "not-a-token"},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.False(t, tokens.Status.Authenticated)

		access, err := client.SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:                  "nobody",
				NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.False(t, access.Status.Allowed)
	})
}

// certificateRequest returns a PEM certificate request.
func certificateRequest(t *testing.T) []byte {
	t.Helper()

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)

	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "test"}}, key)
	require.NoError(t, err)

	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// eventually waits for check to pass, for 20s at most. The checks read the envtest apiserver, a real peer
// over the network that no synctest bubble may hold: a poll is the only wait.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()

	testenv.Eventually(t, 20*time.Second, 50*time.Millisecond, what, func(context.Context) error { return check() })
}
