package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// chartDir is the chart under test, relative to the repository root.
const chartDir = "deploy/helm/talos-ccm"

// exampleValues are the chart's example values files, relative to the chart.
var exampleValues = []string{
	"ci/csr-only-values.yaml",
	"ci/daemonset-values.yaml",
	"ci/full-values.yaml",
	"ci/pvc-values.yaml",
}

// helm caches the helm binary for the package: hack/helm.sh needs to run once.
var helm struct {
	once sync.Once
	path string
	err  error
}

// repoRoot is the repository root, two directories above this package.
func repoRoot(t testing.TB) string {
	t.Helper()

	wd, err := os.Getwd()
	require.NoError(t, err)

	root := filepath.Dir(filepath.Dir(wd))
	_, err = os.Stat(filepath.Join(root, chartDir, "Chart.yaml"))
	require.NoError(t, err, "the tests run from test/deploy in the repository")

	return root
}

// helmBinary returns the helm command built from its Go module by hack/helm.sh (a cold build takes a
// few minutes; later runs reuse the cached binary).
func helmBinary(t testing.TB) string {
	t.Helper()

	root := repoRoot(t)

	helm.once.Do(func() {
		var stdout bytes.Buffer

		cmd := exec.Command(filepath.Join(root, "hack", "helm.sh"))
		cmd.Dir = root
		cmd.Stdout = &stdout
		cmd.Stderr = os.Stderr

		if err := cmd.Run(); err != nil {
			helm.err = err

			return
		}

		helm.path = strings.TrimSpace(stdout.String())
	})

	require.NoError(t, helm.err, "failed to build helm with hack/helm.sh")

	return helm.path
}

// runHelm runs helm in the repository root and returns its stdout, or its error with stderr.
func runHelm(t testing.TB, args ...string) ([]byte, error) {
	t.Helper()

	var stdout, stderr bytes.Buffer

	cmd := exec.Command(helmBinary(t), args...)
	cmd.Dir = repoRoot(t)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// Helm must not read the developer's repositories, plugins or registry logins.
	home := t.TempDir()
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)

	if err := cmd.Run(); err != nil {
		return nil, errors.New(strings.TrimSpace(err.Error() + ": " + stderr.String()))
	}

	return stdout.Bytes(), nil
}

// render renders the chart as release name in namespace with the given values files (relative to the
// chart) and --set values, and decodes every object.
func render(t testing.TB, name, namespace string, valuesFiles []string, set ...string) []*unstructured.Unstructured {
	t.Helper()

	out, err := renderRaw(t, name, namespace, valuesFiles, set...)
	require.NoError(t, err)

	return decodeObjects(t, out)
}

func renderRaw(t testing.TB, name, namespace string, valuesFiles []string, set ...string) ([]byte, error) {
	t.Helper()

	args := []string{"template", name, chartDir, "--namespace", namespace}

	for _, f := range valuesFiles {
		args = append(args, "--values", filepath.Join(chartDir, f))
	}

	for _, s := range set {
		args = append(args, "--set", s)
	}

	return runHelm(t, args...)
}

// decodeObjects decodes a multi-document YAML stream, skipping empty documents.
func decodeObjects(t testing.TB, data []byte) []*unstructured.Unstructured {
	t.Helper()

	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)

	var objects []*unstructured.Unstructured

	for {
		obj := &unstructured.Unstructured{}

		err := decoder.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			break
		}

		require.NoError(t, err)

		if len(obj.Object) == 0 {
			continue
		}

		objects = append(objects, obj)
	}

	return objects
}

// find returns the one object of kind (and name, unless empty), or fails the test.
func find(t testing.TB, objects []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()

	var found []*unstructured.Unstructured

	for _, obj := range objects {
		if obj.GetKind() == kind && (name == "" || obj.GetName() == name) {
			found = append(found, obj)
		}
	}

	require.Len(t, found, 1, "want exactly one %s %q", kind, name)

	return found[0]
}

// kinds lists the kinds of objects, sorted.
func kinds(objects []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objects))
	for _, obj := range objects {
		out = append(out, obj.GetKind())
	}

	slices.Sort(out)

	return out
}

// convert converts an unstructured object into a typed one.
func convert[T any](t testing.TB, obj *unstructured.Unstructured) *T {
	t.Helper()

	var out T

	require.NoError(t, k8sruntime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &out, true),
		"%s %s does not convert to %T", obj.GetKind(), obj.GetName(), out)

	return &out
}

// podSpec returns the pod template of the Deployment or DaemonSet among objects.
func podSpec(t testing.TB, objects []*unstructured.Unstructured) *corev1.PodTemplateSpec {
	t.Helper()

	for _, obj := range objects {
		if obj.GetKind() != "Deployment" && obj.GetKind() != "DaemonSet" {
			continue
		}

		template, found, err := unstructured.NestedMap(obj.Object, "spec", "template")
		require.NoError(t, err)
		require.True(t, found)

		return convert[corev1.PodTemplateSpec](t, &unstructured.Unstructured{Object: template})
	}

	t.Fatalf("no Deployment or DaemonSet among %v", kinds(objects))

	return nil
}

// goBuild builds a command of the main module into dir and returns its path.
func goBuild(t testing.TB, pkg, dir string) string {
	t.Helper()

	out := filepath.Join(dir, filepath.Base(pkg))

	gocmd := os.Getenv("GO")
	if gocmd == "" {
		gocmd = "go"
	}

	cmd := exec.Command(gocmd, "build", "-o", out, "./"+pkg)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")

	output, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build %s: %s", pkg, output)

	return out
}

// readFile reads a file of the repository.
func readFile(t testing.TB, path string) []byte {
	t.Helper()

	data, err := os.ReadFile(filepath.Join(repoRoot(t), path))
	require.NoError(t, err)

	return data
}
