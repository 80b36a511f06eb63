package talossim

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeStatusImages is how many container images a kubelet lists in its Node's status at most (its
// --node-status-max-images default), and how many a simulated kubelet lists.
const NodeStatusImages = 50

// kubeletImage is an image a node may have pulled: its repository, tag and typical size.
type kubeletImage struct {
	repo, tag string
	size      int64
}

const mb = 1 << 20

// systemImages are on every Talos node with its default CNI: the sandbox, kube-proxy, Flannel, CoreDNS.
var systemImages = []kubeletImage{
	{"registry.k8s.io/pause", "3.10", 320 << 10},
	{"registry.k8s.io/kube-proxy", DefaultKubeletVersion, 31 * mb},
	{"ghcr.io/siderolabs/flannel", "v0.27.4", 11 * mb},
	{"ghcr.io/siderolabs/install-cni", "v1.11.0", 7 * mb},
	{"registry.k8s.io/coredns/coredns", "v1.12.4", 22 * mb},
}

// workloadImages are what the rest of a node's images are drawn from: add-ons and workloads as a
// cluster runs them, several versions of some, as nodes keep the images of earlier rollouts.
var workloadImages = []kubeletImage{
	{"docker.io/library/nginx", "1.27.5", 72 * mb},
	{"docker.io/library/nginx", "1.28.0", 73 * mb},
	{"docker.io/library/nginx", "1.29.1", 74 * mb},
	{"docker.io/library/redis", "7.4.2", 45 * mb},
	{"docker.io/library/redis", "8.0.3", 48 * mb},
	{"docker.io/library/postgres", "16.9", 151 * mb},
	{"docker.io/library/postgres", "17.5", 158 * mb},
	{"docker.io/library/busybox", "1.36.1", 2 * mb},
	{"docker.io/library/busybox", "1.37.0", 2 * mb},
	{"docker.io/library/alpine", "3.21.3", 4 * mb},
	{"docker.io/library/alpine", "3.22.1", 4 * mb},
	{"docker.io/library/python", "3.12-slim", 43 * mb},
	{"docker.io/library/python", "3.13-slim", 45 * mb},
	{"docker.io/library/golang", "1.24.6", 281 * mb},
	{"docker.io/library/golang", "1.25.1", 290 * mb},
	{"docker.io/library/node", "22-alpine", 56 * mb},
	{"docker.io/library/node", "24-alpine", 58 * mb},
	{"docker.io/library/memcached", "1.6.39", 31 * mb},
	{"docker.io/library/rabbitmq", "4.1-management", 112 * mb},
	{"docker.io/library/mariadb", "11.8.2", 109 * mb},
	{"docker.io/library/traefik", "v3.5.1", 51 * mb},
	{"docker.io/grafana/grafana", "12.1.1", 187 * mb},
	{"docker.io/grafana/loki", "3.5.3", 42 * mb},
	{"docker.io/grafana/promtail", "3.5.3", 78 * mb},
	{"docker.io/envoyproxy/envoy", "v1.35.1", 62 * mb},
	{"quay.io/prometheus/prometheus", "v3.5.0", 122 * mb},
	{"quay.io/prometheus/node-exporter", "v1.9.1", 11 * mb},
	{"quay.io/prometheus/alertmanager", "v0.28.1", 31 * mb},
	{"quay.io/prometheus-operator/prometheus-config-reloader", "v0.85.0", 6 * mb},
	{"quay.io/prometheus-operator/prometheus-operator", "v0.85.0", 17 * mb},
	{"quay.io/jetstack/cert-manager-controller", "v1.18.2", 20 * mb},
	{"quay.io/jetstack/cert-manager-webhook", "v1.18.2", 17 * mb},
	{"quay.io/jetstack/cert-manager-cainjector", "v1.18.2", 15 * mb},
	{"quay.io/cilium/cilium", "v1.18.1", 201 * mb},
	{"quay.io/cilium/operator-generic", "v1.18.1", 30 * mb},
	{"quay.io/cilium/hubble-relay", "v1.18.1", 24 * mb},
	{"quay.io/argoproj/argocd", "v3.1.1", 183 * mb},
	{"quay.io/kiwigrid/k8s-sidecar", "1.30.9", 36 * mb},
	{"registry.k8s.io/ingress-nginx/controller", "v1.13.1", 111 * mb},
	{"registry.k8s.io/metrics-server/metrics-server", "v0.8.0", 20 * mb},
	{"registry.k8s.io/kube-state-metrics/kube-state-metrics", "v2.16.0", 18 * mb},
	{"registry.k8s.io/sig-storage/csi-node-driver-registrar", "v2.14.0", 10 * mb},
	{"registry.k8s.io/sig-storage/livenessprobe", "v2.16.0", 10 * mb},
	{"registry.k8s.io/sig-storage/csi-provisioner", "v5.3.0", 31 * mb},
	{"registry.k8s.io/sig-storage/csi-attacher", "v4.9.0", 29 * mb},
	{"registry.k8s.io/sig-storage/csi-resizer", "v1.14.0", 29 * mb},
	{"registry.k8s.io/sig-storage/csi-snapshotter", "v8.3.0", 28 * mb},
	{"registry.k8s.io/sig-storage/snapshot-controller", "v8.3.0", 26 * mb},
	{"registry.k8s.io/external-dns/external-dns", "v0.18.0", 33 * mb},
	{"registry.k8s.io/autoscaling/cluster-autoscaler", "v1.34.0", 41 * mb},
	{"ghcr.io/siderolabs/talos-cloud-controller-manager", "v1.10.1", 29 * mb},
	{"ghcr.io/siderolabs/kubelet-serving-cert-approver", "v0.9.2", 18 * mb},
	{"ghcr.io/siderolabs/local-path-provisioner", "v0.0.31", 20 * mb},
	{"ghcr.io/fluxcd/source-controller", "v1.6.2", 38 * mb},
	{"ghcr.io/fluxcd/kustomize-controller", "v1.6.1", 37 * mb},
	{"ghcr.io/fluxcd/helm-controller", "v1.3.0", 40 * mb},
	{"ghcr.io/fluxcd/notification-controller", "v1.6.0", 29 * mb},
	{"ghcr.io/external-secrets/external-secrets", "v0.19.2", 46 * mb},
	{"ghcr.io/kyverno/kyverno", "v1.15.1", 59 * mb},
	{"ghcr.io/kyverno/background-controller", "v1.15.1", 38 * mb},
	{"ghcr.io/kyverno/reports-controller", "v1.15.1", 39 * mb},
	{"ghcr.io/kyverno/cleanup-controller", "v1.15.1", 37 * mb},
	{"ghcr.io/stakater/reloader", "v1.4.6", 25 * mb},
	{"ghcr.io/dexidp/dex", "v2.43.1", 36 * mb},
}

// KubeletStatus is the status the kubelet of machine m posts for its Node, as a kubelet with an
// external cloud provider does: capacity and allocatable (what Talos's default system reservation and
// eviction thresholds leave), the four conditions with the kubelet's own reasons and messages, its
// endpoint, node info, the runtime's handlers and features, and NodeStatusImages container images with
// a digest and a tag each. It has no addresses: with an external cloud provider the CCM sets them.
//
// The images a machine has are drawn from its name, the same on every run, so that runs compare; an
// image's digest and size are the same on every machine that has it, as in a cluster.
func KubeletStatus(m Machine, kubeletVersion string, now time.Time) corev1.NodeStatus {
	systemUUID := m.System.UUID
	if systemUUID == "" {
		// A machine without SystemInformation still has the DMI UUID its kubelet reads.
		systemUUID = machineGenerator(m.Name, 1).uuid()
	}

	status := corev1.NodeStatus{
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("4"),
			corev1.ResourceMemory:           resource.MustParse("16386220Ki"),
			corev1.ResourcePods:             resource.MustParse("110"),
			corev1.ResourceEphemeralStorage: resource.MustParse("101430960Ki"),
			"hugepages-1Gi":                 resource.MustParse("0"),
			"hugepages-2Mi":                 resource.MustParse("0"),
		},
		// Talos reserves 50m of CPU, 192Mi of memory and 256Mi of disk for the system, and the kubelet
		// evicts below 100Mi of memory and 10% of disk.
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("3950m"),
			corev1.ResourceMemory:           resource.MustParse("16087212Ki"),
			corev1.ResourcePods:             resource.MustParse("110"),
			corev1.ResourceEphemeralStorage: resource.MustParse("93210337280"),
			"hugepages-1Gi":                 resource.MustParse("0"),
			"hugepages-2Mi":                 resource.MustParse("0"),
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID:               strings.ReplaceAll(systemUUID, "-", ""),
			SystemUUID:              systemUUID,
			BootID:                  bootID(),
			KernelVersion:           "6.12.57-talos",
			OSImage:                 "Talos (v1.13.5)",
			ContainerRuntimeVersion: "containerd://2.1.5",
			KubeletVersion:          kubeletVersion,
			OperatingSystem:         "linux",
			Architecture:            "amd64",
		},
		RuntimeHandlers: []corev1.NodeRuntimeHandler{
			{Name: "runc", Features: runtimeHandlerFeatures()},
			{Name: "", Features: runtimeHandlerFeatures()},
		},
		Features: &corev1.NodeFeatures{SupplementalGroupsPolicy: new(true)},
		Images:   machineImages(m.Name),
	}

	heartbeat := func(cond corev1.NodeCondition) corev1.NodeCondition {
		cond.LastHeartbeatTime, cond.LastTransitionTime = metav1.NewTime(now), metav1.NewTime(now)

		return cond
	}

	status.Conditions = []corev1.NodeCondition{
		heartbeat(corev1.NodeCondition{
			Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse,
			Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available",
		}),
		heartbeat(corev1.NodeCondition{
			Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse,
			Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure",
		}),
		heartbeat(corev1.NodeCondition{
			Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse,
			Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available",
		}),
		heartbeat(readyCondition(true)),
	}

	return status
}

// BareKubeletStatus is status (a KubeletStatus) without what earlier simulated kubelets did not post
// and no decision of talos-ccm reads: the images, the runtime's handlers and features, the huge pages.
// Measurements made on such Nodes compare with it.
func BareKubeletStatus(status corev1.NodeStatus) corev1.NodeStatus {
	status.Images, status.RuntimeHandlers, status.Features = nil, nil, nil
	status.Capacity, status.Allocatable = withoutHugePages(status.Capacity), withoutHugePages(status.Allocatable)

	return status
}

func withoutHugePages(list corev1.ResourceList) corev1.ResourceList {
	out := maps.Clone(list)
	maps.DeleteFunc(out, func(name corev1.ResourceName, _ resource.Quantity) bool {
		return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
	})

	return out
}

// readyCondition is the Ready condition a kubelet posts (without its times).
func readyCondition(ready bool) corev1.NodeCondition {
	if !ready {
		return corev1.NodeCondition{
			Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "talos-sim: node set not ready",
		}
	}

	return corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
	}
}

func runtimeHandlerFeatures() *corev1.NodeRuntimeHandlerFeatures {
	return &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: new(true), UserNamespaces: new(true)}
}

// machineImages are the NodeStatusImages images of the machine named name: the system images and
// workload images drawn from its name, largest first as a kubelet lists them.
func machineImages(name string) []corev1.ContainerImage {
	picked := slices.Clone(workloadImages)
	rng := machineGenerator(name, 2).rng
	rng.Shuffle(len(picked), func(i, j int) { picked[i], picked[j] = picked[j], picked[i] })

	picked = append(slices.Clone(systemImages), picked[:NodeStatusImages-len(systemImages)]...)

	images := make([]corev1.ContainerImage, 0, len(picked))

	for _, img := range picked {
		ref := img.repo + ":" + img.tag
		digest := sha256.Sum256([]byte(ref))
		// The same image has the same size everywhere; sizes are not round numbers.
		jitter := int64(digest[0])<<12 | int64(digest[1])<<4

		images = append(images, corev1.ContainerImage{
			Names:     []string{img.repo + "@sha256:" + hex.EncodeToString(digest[:]), ref},
			SizeBytes: img.size + jitter,
		})
	}

	slices.SortStableFunc(images, func(a, b corev1.ContainerImage) int { return cmp.Compare(b.SizeBytes, a.SizeBytes) })

	return images
}

// machineGenerator is a generator seeded by a machine's name and a purpose, the same on every run.
func machineGenerator(name string, purpose uint64) *generator {
	h := fnv.New64a()
	h.Write([]byte(name))

	return &generator{rng: rand.New(rand.NewPCG(h.Sum64(), purpose))}
}

// bootID is a fresh boot ID, as /proc/sys/kernel/random/boot_id gives one per boot.
func bootID() string {
	h := randomHex(16)

	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
