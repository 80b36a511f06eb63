package deploy_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/talos-ccm/talos-ccm/internal/app"
)

func TestChartLints(t *testing.T) {
	t.Parallel()

	for _, values := range append([]string{""}, exampleValues...) {
		name := values
		if name == "" {
			name = "default values"
		}

		t.Run(name, func(t *testing.T) {
			t.Parallel()

			args := []string{"lint", "--strict", chartDir, "--namespace", "kube-system"}
			if values != "" {
				args = append(args, "--values", chartDir+"/"+values)
			}

			out, err := runHelm(t, args...)
			require.NoError(t, err)
			assert.Contains(t, string(out), "0 chart(s) failed")
		})
	}
}

func TestChartRendersEveryExample(t *testing.T) {
	t.Parallel()

	for _, values := range exampleValues {
		t.Run(values, func(t *testing.T) {
			t.Parallel()

			objects := render(t, "talos-ccm", "kube-system", []string{values})
			require.NotEmpty(t, objects)

			for _, obj := range objects {
				switch {
				case obj.GetKind() == "ClusterRole" || obj.GetKind() == "ClusterRoleBinding":
				case obj.GetName() == "talos-ccm-apiserver-endpoints":
					// Reading the kubernetes Service's EndpointSlice is granted where it lives.
					assert.Equal(t, "default", obj.GetNamespace(), "%s %s", obj.GetKind(), obj.GetName())
				default:
					assert.Equal(t, "kube-system", obj.GetNamespace(), "%s %s", obj.GetKind(), obj.GetName())
				}
			}

			spec := podSpec(t, objects)
			require.Len(t, spec.Spec.Containers, 1)
		})
	}
}

func TestChartDefaultDeployment(t *testing.T) {
	t.Parallel()

	objects := render(t, "talos-ccm", "kube-system", nil)

	// The ClusterRoles: the controllers', the secure metrics' reviews and the scrapers' metrics-reader
	// (bound only with metrics.readers).
	assert.Equal(t, []string{
		"ClusterRole", "ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "ConfigMap",
		"Deployment", "NetworkPolicy", "PodDisruptionBudget", "Role", "Role", "RoleBinding", "RoleBinding",
		"ServiceAccount", "ServiceAccount",
	}, kinds(objects))

	deployment := convert[appsv1.Deployment](t, find(t, objects, "Deployment", "talos-ccm"))
	require.NotNil(t, deployment.Spec.Replicas)
	assert.EqualValues(t, 2, *deployment.Spec.Replicas)

	pod := deployment.Spec.Template.Spec
	assert.Equal(t, "system-cluster-critical", pod.PriorityClassName)
	assert.Equal(t, "talos-ccm", pod.ServiceAccountName)
	assert.False(t, pod.HostNetwork)
	assert.Equal(t, map[string]string{"node-role.kubernetes.io/control-plane": ""}, pod.NodeSelector)
	assertTolerates(t, pod.Tolerations, "node.cloudprovider.kubernetes.io/uninitialized", corev1.TaintEffectNoSchedule)
	assertTolerates(t, pod.Tolerations, "node-role.kubernetes.io/control-plane", corev1.TaintEffectNoSchedule)
	require.NotNil(t, pod.Affinity, "replicas spread over nodes")
	require.NotNil(t, pod.Affinity.PodAntiAffinity)

	require.NotNil(t, pod.SecurityContext)
	assert.Equal(t, new(true), pod.SecurityContext.RunAsNonRoot)
	require.NotNil(t, pod.SecurityContext.SeccompProfile)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)

	container := pod.Containers[0]
	sc := container.SecurityContext
	require.NotNil(t, sc)
	assert.Equal(t, new(true), sc.RunAsNonRoot)
	assert.Equal(t, new(true), sc.ReadOnlyRootFilesystem)
	assert.Equal(t, new(false), sc.AllowPrivilegeEscalation)
	require.NotNil(t, sc.Capabilities)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	assert.Empty(t, sc.Capabilities.Add)
	require.NotNil(t, sc.SeccompProfile)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type)

	args := argMap(container.Args)
	assert.Equal(t, "true", args["--leader-elect"])
	assert.Equal(t, "*", args["--controllers"])
	assert.Equal(t, ":10258", args["--health-probe-bind-address"])
	assert.Equal(t, ":10260", args["--metrics-bind-address"])
	assert.NotContains(t, args, "--delete-stale-nodes")

	ports := map[string]int32{}
	for _, p := range container.Ports {
		ports[p.Name] = p.ContainerPort
	}

	assert.Equal(t, map[string]int32{"health": 10258, "metrics": 10260}, ports)

	require.NotNil(t, container.LivenessProbe)
	require.NotNil(t, container.LivenessProbe.HTTPGet)
	assert.Equal(t, "/healthz", container.LivenessProbe.HTTPGet.Path)
	assert.Equal(t, "health", container.LivenessProbe.HTTPGet.Port.String())
	require.NotNil(t, container.ReadinessProbe)
	require.NotNil(t, container.ReadinessProbe.HTTPGet)
	assert.Equal(t, "/readyz", container.ReadinessProbe.HTTPGet.Path)
	assert.Equal(t, "health", container.ReadinessProbe.HTTPGet.Port.String())

	// The state directory is the emptyDir, the config file is in the ConfigMap's directory mount (not
	// a subPath, which would never see an edit), the talosconfig where talos-ccm looks for it.
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range container.VolumeMounts {
		mounts[m.Name] = m
		assert.Empty(t, m.SubPath, "volume %s", m.Name)
	}

	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}

	assert.Equal(t, args["--state-dir"], mounts["state"].MountPath)
	assert.NotNil(t, volumes["state"].EmptyDir)
	assert.Equal(t, mounts["config"].MountPath+"/config.yaml", args["--config"])
	require.NotNil(t, volumes["config"].ConfigMap)
	assert.Equal(t, "talos-ccm", volumes["config"].ConfigMap.Name)
	assert.Equal(t, "/var/run/secrets/talos.dev", mounts["talos-secrets"].MountPath)
	require.NotNil(t, volumes["talos-secrets"].Secret)
	assert.Nil(t, volumes["talos-secrets"].Secret.Optional, "cloud-node cannot work without the Talos API")
	assert.NotNil(t, volumes["tmp"].EmptyDir, "a writable /tmp on the read-only root")

	// The talos.dev ServiceAccount that makes Talos create the mounted Secret, of the same name.
	talosSA := find(t, objects, "ServiceAccount", volumes["talos-secrets"].Secret.SecretName)
	assert.Equal(t, "talos.dev/v1alpha1", talosSA.GetAPIVersion())

	roles, _, err := unstructured.NestedStringSlice(talosSA.Object, "spec", "roles")
	require.NoError(t, err)
	assert.Equal(t, []string{"os:reader"}, roles)

	pdb := convert[policyv1.PodDisruptionBudget](t, find(t, objects, "PodDisruptionBudget", "talos-ccm"))
	require.NotNil(t, pdb.Spec.MaxUnavailable)
	assert.Equal(t, "1", pdb.Spec.MaxUnavailable.String())
	assert.Equal(t, deployment.Spec.Selector, pdb.Spec.Selector)

	configMap := convert[corev1.ConfigMap](t, find(t, objects, "ConfigMap", "talos-ccm"))
	assert.Contains(t, configMap.Data, "config.yaml")
}

func TestChartDaemonSet(t *testing.T) {
	t.Parallel()

	objects := render(t, "talos-ccm", "kube-system", []string{"ci/daemonset-values.yaml"})

	assert.NotContains(t, kinds(objects), "Deployment")
	assert.NotContains(t, kinds(objects), "PodDisruptionBudget")

	daemonSet := convert[appsv1.DaemonSet](t, find(t, objects, "DaemonSet", "talos-ccm"))
	pod := daemonSet.Spec.Template.Spec

	assert.True(t, pod.HostNetwork)
	assert.Equal(t, corev1.DNSClusterFirstWithHostNet, pod.DNSPolicy)
	assert.Equal(t, map[string]string{"node-role.kubernetes.io/control-plane": ""}, pod.NodeSelector)
	assertTolerates(t, pod.Tolerations, "node.kubernetes.io/not-ready", corev1.TaintEffectNoSchedule)
	assertTolerates(t, pod.Tolerations, "node.cloudprovider.kubernetes.io/uninitialized", corev1.TaintEffectNoSchedule)

	env := map[string]corev1.EnvVar{}
	for _, e := range pod.Containers[0].Env {
		env[e.Name] = e
	}

	// Without the Service network: KubePrism for Kubernetes, the node's own Talos API.
	assert.Equal(t, "localhost", env["KUBERNETES_SERVICE_HOST"].Value)
	assert.Equal(t, "7445", env["KUBERNETES_SERVICE_PORT"].Value)
	require.NotNil(t, env["TALOS_ENDPOINTS"].ValueFrom)
	assert.Equal(t, "status.hostIP", env["TALOS_ENDPOINTS"].ValueFrom.FieldRef.FieldPath)

	assert.Equal(t, "true", argMap(pod.Containers[0].Args)["--leader-elect"], "one leader among the control-plane nodes")
}

func TestChartPersistentVolumeClaim(t *testing.T) {
	t.Parallel()

	objects := render(t, "talos-ccm", "kube-system", []string{"ci/pvc-values.yaml"})

	claim := convert[corev1.PersistentVolumeClaim](t, find(t, objects, "PersistentVolumeClaim", "talos-ccm-state"))
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, claim.Spec.AccessModes)
	assert.Equal(t, "2Gi", claim.Spec.Resources.Requests.Storage().String())

	deployment := convert[appsv1.Deployment](t, find(t, objects, "Deployment", "talos-ccm"))
	assert.Equal(t, appsv1.RecreateDeploymentStrategyType, deployment.Spec.Strategy.Type,
		"a ReadWriteOnce claim cannot be attached to two pods on two nodes during a rollout")

	var state *corev1.Volume

	for i, v := range deployment.Spec.Template.Spec.Volumes {
		if v.Name == "state" {
			state = &deployment.Spec.Template.Spec.Volumes[i]
		}
	}

	require.NotNil(t, state)
	require.NotNil(t, state.PersistentVolumeClaim)
	assert.Equal(t, "talos-ccm-state", state.PersistentVolumeClaim.ClaimName)

	// An existing claim is used as is.
	objects = render(t, "talos-ccm", "kube-system", []string{"ci/pvc-values.yaml"}, "state.persistentVolumeClaim.existingClaim=mine")
	assert.NotContains(t, kinds(objects), "PersistentVolumeClaim")
	assert.Contains(t, podSpec(t, objects).Spec.Volumes[0].PersistentVolumeClaim.ClaimName, "mine")
}

func TestChartCSROnly(t *testing.T) {
	t.Parallel()

	objects := render(t, "talos-ccm", "kube-system", []string{"ci/csr-only-values.yaml"})

	for _, obj := range objects {
		assert.NotEqual(t, "talos.dev/v1alpha1", obj.GetAPIVersion(), "no Talos ServiceAccount in CSR-only mode")
	}

	spec := podSpec(t, objects)

	for _, v := range spec.Spec.Volumes {
		if v.Name == "talos-secrets" {
			require.NotNil(t, v.Secret.Optional)
			assert.True(t, *v.Secret.Optional, "the approver works without Talos credentials")
		}
	}

	args := argMap(spec.Spec.Containers[0].Args)
	assert.Equal(t, "csr-approval", args["--controllers"])
	assert.Equal(t, "10.96.0.0/12,fd00:10:96::/112", args["--service-cluster-ip-range"])

	configMap := convert[corev1.ConfigMap](t, find(t, objects, "ConfigMap", "talos-ccm"))

	var config map[string]any

	require.NoError(t, yaml.Unmarshal([]byte(configMap.Data["config.yaml"]), &config))
	assert.Equal(t, map[string]any{
		"csrApproval": map[string]any{"allowedIPPrefixes": []any{"10.0.0.0/8", "fd00::/8"}},
	}, config)
}

// TestChartConfigFileVerbatim checks that the config file reaches talos-ccm as written: templates in
// transformation rules are talos-ccm's, not Helm's.
func TestChartConfigFileVerbatim(t *testing.T) {
	t.Parallel()

	objects := render(t, "talos-ccm", "kube-system", []string{"ci/full-values.yaml"})
	configMap := convert[corev1.ConfigMap](t, find(t, objects, "ConfigMap", "talos-ccm"))

	var rendered, values map[string]any

	require.NoError(t, yaml.Unmarshal([]byte(configMap.Data["config.yaml"]), &rendered))

	raw := readFile(t, chartDir+"/ci/full-values.yaml")
	require.NoError(t, yaml.Unmarshal(raw, &values))

	assert.Equal(t, values["config"], rendered)
	assert.Contains(t, configMap.Data["config.yaml"], "{{ .InstanceID }}")
}

func TestChartRejectsValuesThatCannotWork(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name   string
		values []string
		set    []string
		want   string
	}{
		{name: "unknown mode", set: []string{"mode=StatefulSet"}, want: "at '/mode': value must be one of 'Deployment', 'DaemonSet'"},
		{name: "unknown controller", set: []string{"controllers={*,cloud-nodes}"}, want: `unknown controller "cloud-nodes"`},
		{name: "unknown removed controller", set: []string{"controllers={*,-csr}"}, want: `unknown controller "csr"`},
		{name: "no controller", set: []string{"controllers={cloud-node,-cloud-node}"}, want: "enables no controller"},
		{name: "claim in a DaemonSet", values: []string{"ci/daemonset-values.yaml"}, set: []string{"state.type=persistentVolumeClaim"}, want: "needs mode Deployment"},
		{name: "one claim for two replicas", set: []string{"state.type=persistentVolumeClaim"}, want: "needs replicas: 1"},
		{name: "unknown state type", set: []string{"state.type=hostPath"}, want: "at '/state/type': value must be one of"},
		{name: "pod CIDRs without node-ipam", set: []string{"nodeIPAM.allocateNodeCIDRs=true", "controllers={*,-node-ipam}"}, want: "turns node-ipam on"},
		{name: "Talos CCM chart value", set: []string{"replicaCount=3"}, want: "replicaCount is a value of the Talos CCM chart: talos-ccm's is replicas"},
		{name: "Talos CCM transformations", values: []string{"ci/full-values.yaml"}, set: []string{"transformations=null", "useDaemonSet=true"}, want: "value of the Talos CCM chart"},
		{name: "misspelt value", set: []string{"leaderElection.leaseDurations=15s"}, want: "additional properties 'leaseDurations' not allowed"},
		{name: "duration without unit", set: []string{"nodeLifecycle.staleNodeGrace=300"}, want: "staleNodeGrace"},
		{name: "ServiceMonitor without Service", set: []string{"metrics.serviceMonitor.enabled=true"}, want: "needs metrics.enabled and metrics.service.enabled"},
		{name: "plain HTTP metrics on every interface", set: []string{"metrics.secure=false"}, want: "needs a localhost metrics.bindAddress"},
		{name: "plain HTTP metrics on a pod IP", set: []string{"metrics.secure=false", "metrics.bindAddress=10.0.0.5:10260"}, want: "needs a localhost metrics.bindAddress"},
		{name: "metrics certificate twice", set: []string{"metrics.tls.secretName=tls", "metrics.tls.certFile=/tls.crt", "metrics.tls.keyFile=/tls.key"}, want: "not both"},
		{name: "metrics certificate without key", set: []string{"metrics.tls.certFile=/tls.crt"}, want: "go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			_, err := renderRaw(t, "talos-ccm", "kube-system", tc.values, tc.set...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestChartControllersAgreeWithTalosCCM checks that the chart resolves --controllers (from which it
// computes the RBAC rules) exactly as talos-ccm does.
func TestChartControllersAgreeWithTalosCCM(t *testing.T) {
	t.Parallel()

	for _, spec := range [][]string{
		{"*"},
		{"csr-approval"},
		{"*", "-csr-approval"},
		{"*", "node-ipam", "service-lb"},
		{"-cloud-node", "*"},
		{"cloud-node", "-cloud-node", "node-lifecycle"},
		{"service-lb"},
		{" * ", " -node-lifecycle "},
	} {
		t.Run(strings.Join(spec, ","), func(t *testing.T) {
			t.Parallel()

			want, err := app.EnabledControllers(spec)
			require.NoError(t, err)

			objects := render(t, "talos-ccm", "kube-system", nil, "controllers={"+strings.Join(spec, ",")+"}")
			role := find(t, objects, "ClusterRole", "talos-ccm")

			got := strings.Split(role.GetAnnotations()["talos-ccm.dev/controllers"], ",")
			assert.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(slices.Values(got)))
		})
	}

	// --allocate-node-cidrs adds node-ipam to any selection.
	objects := render(t, "talos-ccm", "kube-system", nil, "controllers={csr-approval}", "nodeIPAM.allocateNodeCIDRs=true")
	assert.Equal(t, "csr-approval,node-ipam", find(t, objects, "ClusterRole", "talos-ccm").GetAnnotations()["talos-ccm.dev/controllers"])
}

// TestChartRBACRules checks the rules computed from the values, rule by rule.
func TestChartRBACRules(t *testing.T) {
	t.Parallel()

	nodeVerbs := func(rules []rbacv1.PolicyRule) []string {
		for _, r := range rules {
			if slices.Equal(r.Resources, []string{"nodes"}) {
				return slices.Sorted(slices.Values(r.Verbs))
			}
		}

		return nil
	}

	has := func(rules []rbacv1.PolicyRule, group, resource string) bool {
		return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource)
		})
	}

	for _, tc := range []struct {
		name      string
		values    []string
		set       []string
		nodeVerbs []string
		// nodeStatus, csr and services say whether nodes/status, CSR and Service rules are granted.
		nodeStatus, csr, services bool
	}{
		{name: "default", nodeVerbs: []string{"get", "list", "patch", "update", "watch"}, nodeStatus: true, csr: true},
		{name: "stale node deletion", set: []string{"nodeLifecycle.deleteStaleNodes=true"}, nodeVerbs: []string{"delete", "get", "list", "patch", "update", "watch"}, nodeStatus: true, csr: true},
		{name: "spot node deletion", set: []string{"nodeLifecycle.deletePreemptedSpotNodes=true"}, nodeVerbs: []string{"delete", "get", "list", "patch", "update", "watch"}, nodeStatus: true, csr: true},
		{name: "deletion flag without node-lifecycle", set: []string{"nodeLifecycle.deleteStaleNodes=true", "controllers={*,-node-lifecycle}"}, nodeVerbs: []string{"get", "list", "patch", "update", "watch"}, nodeStatus: true, csr: true},
		{name: "csr only", values: []string{"ci/csr-only-values.yaml"}, nodeVerbs: []string{"get", "list", "watch"}, csr: true},
		{name: "lifecycle only", set: []string{"controllers={node-lifecycle}"}, nodeVerbs: []string{"get", "list", "update", "watch"}},
		{name: "pod CIDRs", set: []string{"controllers={csr-approval}", "nodeIPAM.allocateNodeCIDRs=true"}, nodeVerbs: []string{"get", "list", "patch", "watch"}, csr: true},
		{name: "service-lb", set: []string{"controllers={*,service-lb}"}, nodeVerbs: []string{"get", "list", "patch", "update", "watch"}, nodeStatus: true, csr: true, services: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			objects := render(t, "talos-ccm", "kube-system", tc.values, tc.set...)
			rules := convert[rbacv1.ClusterRole](t, find(t, objects, "ClusterRole", "talos-ccm")).Rules

			assert.Equal(t, tc.nodeVerbs, nodeVerbs(rules))
			assert.Equal(t, tc.nodeStatus, has(rules, "", "nodes/status"))
			assert.Equal(t, tc.csr, has(rules, "certificates.k8s.io", "certificatesigningrequests/approval"))
			assert.Equal(t, tc.csr, has(rules, "certificates.k8s.io", "signers"))
			assert.Equal(t, tc.services, has(rules, "", "services"))
			assert.Equal(t, tc.services, has(rules, "", "services/status"))
			assert.True(t, has(rules, "", "events"))

			for _, r := range rules {
				assert.NotContains(t, r.Verbs, "*")
				assert.NotContains(t, r.Resources, "*")

				if slices.Contains(r.Resources, "signers") {
					assert.Equal(t, []string{"kubernetes.io/kubelet-serving"}, r.ResourceNames)
					assert.Equal(t, []string{"approve"}, r.Verbs)
				}
			}

			// Leader election: create any Lease (a name cannot limit create), read and renew its own.
			role := convert[rbacv1.Role](t, find(t, objects, "Role", "talos-ccm-leader-election"))
			assert.Equal(t, "kube-system", role.Namespace)
			assert.Equal(t, []rbacv1.PolicyRule{
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
				{
					APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"talos-ccm"},
					Verbs: []string{"get", "update"},
				},
			}, role.Rules)
		})
	}
}

// argMap maps "--name=value" arguments to their values ("true" for a bare "--name").
func argMap(args []string) map[string]string {
	out := map[string]string{}

	for _, arg := range args {
		name, value, found := strings.Cut(arg, "=")
		if !found {
			value = "true"
		}

		out[name] = value
	}

	return out
}

func assertTolerates(t *testing.T, tolerations []corev1.Toleration, key string, effect corev1.TaintEffect) {
	t.Helper()

	tolerates := func(tol corev1.Toleration) bool {
		return (tol.Key == key || (tol.Key == "" && tol.Operator == corev1.TolerationOpExists)) &&
			(tol.Effect == effect || tol.Effect == "") &&
			(tol.Operator == corev1.TolerationOpExists || tol.Value == "true")
	}

	assert.True(t, slices.ContainsFunc(tolerations, tolerates), "no toleration of %s:%s in %v", key, effect, tolerations)
}
