package kubekeys_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
)

// TestKeysAreQualifiedNames checks that every key is one the apiserver accepts as a label, annotation,
// taint or condition type key: a typo in a key would otherwise show only as a rejected write.
func TestKeysAreQualifiedNames(t *testing.T) {
	t.Parallel()

	for _, key := range []string{
		kubekeys.TaintUninitialized,
		kubekeys.TaintShutdown,
		kubekeys.LabelRegion,
		kubekeys.LabelZone,
		kubekeys.LabelInstanceType,
		kubekeys.LabelPlatform,
		kubekeys.LabelLifecycle,
		kubekeys.LabelClusterName,
		kubekeys.LabelBetaInstanceType,
		kubekeys.LabelBetaZone,
		kubekeys.LabelBetaRegion,
		kubekeys.LabelControlPlane,
		kubekeys.LabelMaster,
		kubekeys.LabelBetaOS,
		kubekeys.LabelBetaArch,
		kubekeys.AnnotationProvidedNodeIP,
		kubekeys.AnnotationOwnedTaints,
		kubekeys.AnnotationOwnedLabels,
		kubekeys.AnnotationOwnedAnnotations,
		kubekeys.AnnotationLoadBalancerIPs,
		kubekeys.AnnotationSharingKey,
		kubekeys.AnnotationSharingNamespaces,
		kubekeys.AnnotationReleaseLoadBalancerIP,
		kubekeys.AnnotationLoadBalancerPool,
		kubekeys.AnnotationMetalLBIPs,
		kubekeys.AnnotationCiliumIPs,
		kubekeys.ConditionLoadBalancerIPAllocated,
	} {
		assert.Empty(t, validation.IsQualifiedName(key), key)
	}

	// The class is not a key, but the apiserver validates it as one.
	assert.Empty(t, validation.IsQualifiedName(kubekeys.LoadBalancerClass))

	// The prefixes are the namespaces of keys: a domain and a slash.
	for _, prefix := range []string{kubekeys.TaintPrefixNodeLifecycle, kubekeys.AnnotationPrefixOwn, kubekeys.ServiceAnnotationPrefix} {
		domain, ok := strings.CutSuffix(prefix, "/")
		assert.True(t, ok, prefix)
		assert.Empty(t, validation.IsDNS1123Subdomain(domain), prefix)
	}
}
