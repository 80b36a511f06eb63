package talossim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
)

// Defaults of KubeletOptions, sized to register 5,000 nodes quickly.
const (
	DefaultKubeletConcurrency = 64
	DefaultKubeletQPS         = 1000
	DefaultKubeletBurst       = 2000
	DefaultKubeletVersion     = "v1.36.3"
)

// KubeletOptions tunes Kubelets; the zero value gives the defaults.
type KubeletOptions struct {
	// Logger receives progress and errors (a no-op logger when nil).
	Logger *zap.Logger
	// Concurrency is the number of workers creating Nodes and CSRs (DefaultKubeletConcurrency when 0).
	Concurrency int
	// QPS and Burst limit every request of the kubelets together (defaults DefaultKubeletQPS and
	// DefaultKubeletBurst).
	QPS   float32
	Burst int
	// KubeletVersion is reported in the Nodes' status (DefaultKubeletVersion when empty).
	KubeletVersion string
	// BareStatus posts the conditions, node info and capacity only, without the images, the runtime's
	// handlers and the huge pages a kubelet also posts (KubeletStatus): Nodes a few times smaller than
	// real ones, to compare with measurements made on such Nodes.
	BareStatus bool
}

// NodeTimes are the moments a simulated kubelet did something for its node, for benchmarks.
type NodeTimes struct {
	// Created is when the Node was created (or found existing).
	Created time.Time `json:"created"`
	// Ready is when the Ready condition was first posted.
	Ready time.Time `json:"ready"`
	// Initialized is when the kubelet first saw the Node without the uninitialized taint.
	Initialized time.Time `json:"initialized,omitzero"`
	// CSRSubmitted is when the newest serving CSR was created, CSRName its name, CSRs how many the kubelet
	// filed.
	CSRSubmitted time.Time `json:"csrSubmitted,omitzero"`
	CSRName      string    `json:"csrName,omitempty"`
	CSRs         int       `json:"csrs,omitempty"`
	// CSRSettled is when the kubelet stopped asking: its newest request was seen approved with every name
	// and IP of its Node's addresses then, or denied with the names and IPs its Node still has. It is zero
	// until then, and again once its Node's addresses call for another request.
	CSRSettled time.Time `json:"csrSettled,omitzero"`
}

// Kubelets acts as the kubelets of a fleet: it registers a Node for every machine as a kubelet with
// --cloud-provider=external and --node-ip (which Talos always passes) does, with the node IPs and its
// hostname as the Node's first addresses, and asks for a serving certificate as a kubelet's certificate
// manager does (requestDue): at once for those addresses, and again, once that request is approved, when
// the cloud controller manager gave the Node a name or IP that the certificate lacks.
//
// Every write a kubelet makes (its Node, its status, its CSRs) is made as that node (user
// system:node:NAME in groups system:nodes and system:authenticated, by impersonation), so the
// apiserver's Node authorizer and NodeRestriction admission hold it to what a real kubelet may do.
// What Talos's machined writes with admin credentials (the control-plane role label) is written as
// the admin; so are the reads, which a real kubelet makes of its own Node only.
//
// More machines can join with Add, before or while it runs.
type Kubelets struct {
	opts      KubeletOptions
	restCfg   *rest.Config
	clientset kubernetes.Interface
	logger    *zap.Logger

	queue   workqueue.TypedRateLimitingInterface[kubeletTask]
	factory informers.SharedInformerFactory
	nodes   cache.SharedIndexInformer
	csrs    cache.SharedIndexInformer

	mu       sync.Mutex
	machines map[string]Machine
	times    map[string]*NodeTimes
	// requests holds each kubelet's newest serving certificate request.
	requests map[string]*servingRequest
	// waiting holds the initial machines whose Node is not registered yet; registered closes when
	// it becomes empty.
	waiting    map[string]bool
	registered chan struct{}
}

// kubeletTask is one unit of kubelet work on one node.
type kubeletTask struct {
	op   kubeletOp
	name string
}

type kubeletOp int

const (
	opRegister kubeletOp = iota
	opCSR
)

// NewKubelets prepares the kubelets of machines; Run starts them. config must authenticate as a
// cluster admin allowed to impersonate nodes.
func NewKubelets(config *rest.Config, machines []Machine, opts KubeletOptions) (*Kubelets, error) {
	if config == nil {
		return nil, errors.New("failed to create kubelets: no rest config")
	}

	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}

	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultKubeletConcurrency
	}

	if opts.QPS <= 0 {
		opts.QPS = DefaultKubeletQPS
	}

	if opts.Burst <= 0 {
		opts.Burst = DefaultKubeletBurst
	}

	if opts.KubeletVersion == "" {
		opts.KubeletVersion = DefaultKubeletVersion
	}

	restCfg := rest.CopyConfig(config)
	restCfg.QPS = opts.QPS
	restCfg.Burst = opts.Burst
	// One limiter for the admin client and every impersonating client: QPS and Burst bound them all.
	restCfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(opts.QPS, opts.Burst)
	restCfg.UserAgent = "talos-sim-kubelets"

	clientset, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create clientset: %w", err)
	}

	k := &Kubelets{
		opts:       opts,
		restCfg:    restCfg,
		clientset:  clientset,
		logger:     opts.Logger,
		queue:      workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[kubeletTask]()),
		machines:   make(map[string]Machine, len(machines)),
		times:      make(map[string]*NodeTimes, len(machines)),
		requests:   make(map[string]*servingRequest, len(machines)),
		waiting:    make(map[string]bool, len(machines)),
		registered: make(chan struct{}),
	}

	for _, m := range machines {
		k.machines[m.Name] = m.Clone()
		k.waiting[m.Name] = true
		k.queue.Add(kubeletTask{op: opRegister, name: m.Name})
	}

	if len(k.waiting) == 0 {
		close(k.registered)
	}

	k.factory = informers.NewSharedInformerFactory(clientset, 0)
	k.nodes = k.factory.Core().V1().Nodes().Informer()

	if _, err = k.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    k.observe,
		UpdateFunc: func(_, obj any) { k.observe(obj) },
	}); err != nil {
		return nil, fmt.Errorf("failed to watch nodes: %w", err)
	}

	k.csrs = k.factory.Certificates().V1().CertificateSigningRequests().Informer()

	if _, err = k.csrs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    k.observeRequest,
		UpdateFunc: func(_, obj any) { k.observeRequest(obj) },
	}); err != nil {
		return nil, fmt.Errorf("failed to watch certificate requests: %w", err)
	}

	return k, nil
}

// Add registers the Node of one more machine (a machine already known is ignored).
func (k *Kubelets) Add(m Machine) {
	k.mu.Lock()

	if _, ok := k.machines[m.Name]; ok {
		k.mu.Unlock()

		return
	}

	k.machines[m.Name] = m.Clone()
	k.mu.Unlock()

	k.queue.Add(kubeletTask{op: opRegister, name: m.Name})
}

// Run registers every machine's Node and serves CSRs until ctx ends.
func (k *Kubelets) Run(ctx context.Context) error {
	k.factory.Start(ctx.Done())

	var wg sync.WaitGroup

	for range k.opts.Concurrency {
		wg.Go(func() {
			for k.processNext(ctx) {
			}
		})
	}

	k.logger.Info("kubelets started", zap.Int("machines", k.count()), zap.Int("workers", k.opts.Concurrency))

	<-ctx.Done()

	k.queue.ShutDown()
	wg.Wait()
	k.factory.Shutdown()

	return nil
}

// Registered is closed once every machine given to NewKubelets has its Node registered and Ready.
func (k *Kubelets) Registered() <-chan struct{} {
	return k.registered
}

// Times returns the timestamps of one node.
func (k *Kubelets) Times(name string) (NodeTimes, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()

	t, ok := k.times[name]
	if !ok {
		return NodeTimes{}, false
	}

	return *t, true
}

// AllTimes returns the timestamps of every node registered so far.
func (k *Kubelets) AllTimes() map[string]NodeTimes {
	k.mu.Lock()
	defer k.mu.Unlock()

	res := make(map[string]NodeTimes, len(k.times))

	for name, t := range k.times {
		res[name] = *t
	}

	return res
}

// SetReady posts the node's Ready condition as True or False, as the node's kubelet.
func (k *Kubelets) SetReady(ctx context.Context, name string, ready bool) error {
	client, err := k.nodeCoreClient(name)
	if err != nil {
		return err
	}

	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := client.Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}

		setReadyCondition(node, ready, time.Now())

		_, err = client.Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})

		return err
	})
	if err != nil {
		return fmt.Errorf("failed to set node %q ready=%t: %w", name, ready, err)
	}

	return nil
}

// observe records when a kubelet's Node is first seen initialized, and queues its serving certificate
// request when one is due.
func (k *Kubelets) observe(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}

	dnsNames, ips := servingSANs(node)

	k.mu.Lock()
	t, known := k.times[node.Name]

	if known && t.Initialized.IsZero() && !hasTaint(node, kubekeys.TaintUninitialized) && len(node.Status.Addresses) > 0 {
		t.Initialized = time.Now()
	}

	due := known && k.requestDueLocked(node.Name, dnsNames, ips)
	k.mu.Unlock()

	if due {
		k.queue.Add(kubeletTask{op: opCSR, name: node.Name})
	}
}

// observeRequest follows the verdict of each kubelet's newest serving certificate request, and queues the
// next request when one is due.
func (k *Kubelets) observeRequest(obj any) {
	csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return
	}

	name := requester(csr)
	if name == "" {
		return
	}

	if k.recordVerdict(name, csr) {
		k.queue.Add(kubeletTask{op: opCSR, name: name})
	}
}

// recordVerdict records the verdict of csr if it is the node's newest request, and reports whether another
// request is due.
func (k *Kubelets) recordVerdict(name string, csr *certificatesv1.CertificateSigningRequest) bool {
	k.mu.Lock()
	defer k.mu.Unlock()

	r, t := k.requests[name], k.times[name]
	verdict := requestVerdictOf(csr)

	if r == nil || t == nil || r.name != csr.Name || r.verdict == verdict {
		return false
	}

	r.verdict = verdict

	obj, exists, _ := k.nodes.GetStore().GetByKey(name)
	node, _ := obj.(*corev1.Node)

	if exists && node != nil {
		if dnsNames, ips := servingSANs(node); k.requestDueLocked(name, dnsNames, ips) {
			return true
		}
	}

	t.CSRSettled = time.Now()

	return false
}

// requestDueLocked reports whether the node's kubelet files a serving certificate request for the names
// and IPs of its Node's addresses (servingSANs), and forgets when it settled if so. k.mu is held.
func (k *Kubelets) requestDueLocked(name string, dnsNames []string, ips []net.IP) bool {
	t, ok := k.times[name]
	if !ok {
		return false
	}

	if !requestDue(k.requests[name], dnsNames, ips) {
		return false
	}

	t.CSRSettled = time.Time{}

	return true
}

func (k *Kubelets) processNext(ctx context.Context) bool {
	task, shutdown := k.queue.Get()
	if shutdown {
		return false
	}

	defer k.queue.Done(task)

	var err error

	switch task.op {
	case opRegister:
		err = k.register(ctx, task.name)
	case opCSR:
		err = k.submitCSR(ctx, task.name)
	}

	switch {
	case err == nil:
		k.queue.Forget(task)
	case ctx.Err() != nil:
		// Shutting down.
	default:
		k.logger.Warn("kubelet task failed", zap.String("node", task.name), zap.Int("op", int(task.op)), zap.Error(err))
		k.queue.AddRateLimited(task)
	}

	return true
}

// register creates the machine's Node and posts its Ready status as the node's kubelet, then labels
// a control-plane machine's Node as Talos does.
func (k *Kubelets) register(ctx context.Context, name string) error {
	k.mu.Lock()
	m := k.machines[name]
	k.mu.Unlock()

	client, err := k.nodeCoreClient(name)
	if err != nil {
		return err
	}

	nodes := client.Nodes()

	node, err := nodes.Create(ctx, newNode(m), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		node, err = nodes.Get(ctx, name, metav1.GetOptions{})
	}

	if err != nil {
		return fmt.Errorf("failed to create node: %w", err)
	}

	k.mu.Lock()
	if _, ok := k.times[name]; !ok {
		k.times[name] = &NodeTimes{Created: time.Now()}
	}
	k.mu.Unlock()

	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		setNodeStatus(node, m, k.opts, time.Now())

		_, updateErr := nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
		if apierrors.IsConflict(updateErr) {
			var getErr error

			if node, getErr = nodes.Get(ctx, name, metav1.GetOptions{}); getErr != nil {
				return getErr
			}
		}

		return updateErr
	})
	if err != nil {
		return fmt.Errorf("failed to post node status: %w", err)
	}

	if m.ControlPlane {
		if err = k.labelControlPlane(ctx, node); err != nil {
			return err
		}
	}

	k.markRegistered(name)

	// The informer may have seen the Node before it was recorded above.
	if obj, exists, _ := k.nodes.GetStore().GetByKey(name); exists {
		k.observe(obj)
	}

	return nil
}

// labelControlPlane adds the control-plane role label to the Node, as the admin: Talos's machined
// does it on a control-plane machine, where a kubelet may not.
func (k *Kubelets) labelControlPlane(ctx context.Context, node *corev1.Node) error {
	if _, ok := node.Labels[kubekeys.LabelControlPlane]; ok {
		return nil
	}

	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:""}}}`, kubekeys.LabelControlPlane)

	if _, err := k.clientset.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("failed to label control-plane node: %w", err)
	}

	return nil
}

func (k *Kubelets) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()

	return len(k.machines)
}

// markRegistered records the first Ready status of a node and counts down the initial machines.
func (k *Kubelets) markRegistered(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()

	t := k.times[name]
	if !t.Ready.IsZero() {
		return
	}

	t.Ready = time.Now()

	if k.waiting[name] {
		delete(k.waiting, name)

		if len(k.waiting) == 0 {
			close(k.registered)
		}
	}
}

// submitCSR creates the node's kubelet-serving CSR for its Node's addresses, impersonating the node, when
// one is due.
func (k *Kubelets) submitCSR(ctx context.Context, name string) error {
	obj, exists, err := k.nodes.GetStore().GetByKey(name)
	if err != nil || !exists {
		return err
	}

	node, _ := obj.(*corev1.Node)
	dnsNames, ips := servingSANs(node)

	k.mu.Lock()
	due := k.requestDueLocked(name, dnsNames, ips)
	k.mu.Unlock()

	if !due {
		// Nothing yet, or the request before is pending: the informers queue the node again.
		return nil
	}

	csr, err := NewServingCSR(name, dnsNames, ips)
	if err != nil {
		return err
	}

	client, err := k.nodeClient(name)
	if err != nil {
		return err
	}

	created, err := client.CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("failed to create csr: %w", err)
	}

	k.mu.Lock()
	t := k.times[name]
	t.CSRSubmitted = time.Now()
	t.CSRName = created.Name
	t.CSRs++

	k.requests[name] = &servingRequest{name: created.Name, dnsNames: dnsNames, ips: ips, verdict: requestPending}
	k.mu.Unlock()

	k.logger.Debug("csr submitted", zap.String("node", name), zap.String("csr", created.Name))

	// A verdict the informer delivered before the request was recorded above.
	if obj, exists, _ = k.csrs.GetStore().GetByKey(created.Name); exists {
		k.observeRequest(obj)
	}

	return nil
}

// nodeClient returns a certificates client that acts as the node's kubelet.
func (k *Kubelets) nodeClient(name string) (*certificatesv1client.CertificatesV1Client, error) {
	client, err := certificatesv1client.NewForConfig(k.nodeConfig(name))
	if err != nil {
		return nil, fmt.Errorf("failed to create node client: %w", err)
	}

	return client, nil
}

// nodeCoreClient returns a core client that acts as the node's kubelet.
func (k *Kubelets) nodeCoreClient(name string) (*corev1client.CoreV1Client, error) {
	client, err := corev1client.NewForConfig(k.nodeConfig(name))
	if err != nil {
		return nil, fmt.Errorf("failed to create node client: %w", err)
	}

	return client, nil
}

// nodeConfig returns the admin's config impersonating the node's kubelet. Its clients share the rate
// limiter and (through client-go's transport cache) the connections of the admin client.
func (k *Kubelets) nodeConfig(name string) *rest.Config {
	return NodeConfig(k.restCfg, name)
}

// NodeConfig returns a copy of cfg that acts as the kubelet of Node name: it impersonates
// system:node:NAME in the groups system:nodes and system:authenticated, as a kubelet's credential (or a
// stolen one) authenticates.
func NodeConfig(cfg *rest.Config, name string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: NodeUserPrefix + name,
		Groups:   []string{NodesGroup, "system:authenticated"},
	}

	return cfg
}

// newNode returns the Node a kubelet with --cloud-provider=external registers for the machine: only
// labels a kubelet may set on its own Node (no role label, see kubekeys.LabelControlPlane).
func newNode(m Machine) *corev1.Node {
	labels := map[string]string{
		corev1.LabelHostname:   m.Name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
		kubekeys.LabelBetaOS:   "linux",
		kubekeys.LabelBetaArch: "amd64",
	}

	ips := make([]string, 0, len(m.NodeIPs))
	for _, ip := range m.NodeIPs {
		ips = append(ips, ip.String())
	}

	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        m.Name,
			Labels:      labels,
			Annotations: map[string]string{kubekeys.AnnotationProvidedNodeIP: strings.Join(ips, ",")},
		},
		Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{{Key: kubekeys.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{Addresses: KubeletFirstAddresses(m)},
	}
}

// KubeletFirstAddresses are the addresses a kubelet with --cloud-provider=external posts when its Node has
// none: with node IPs given (--node-ip, at most one of each family), each as an InternalIP, then its
// hostname (Talos names the Node after it); without, none, and it waits for the cloud provider's.
func KubeletFirstAddresses(m Machine) []corev1.NodeAddress {
	if len(m.NodeIPs) == 0 {
		return nil
	}

	ips := m.NodeIPs[:min(len(m.NodeIPs), 2)]
	addresses := make([]corev1.NodeAddress, 0, len(ips)+1)

	for _, ip := range ips {
		addresses = append(addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip.String()})
	}

	return append(addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: m.Name})
}

// setNodeStatus fills the status a kubelet posts (KubeletStatus, or its bare part), keeping the
// transition times of the conditions that did not change. Addresses the Node has are left alone (with an
// external cloud provider the CCM sets them); a Node without any gets the kubelet's first addresses.
func setNodeStatus(node *corev1.Node, m Machine, opts KubeletOptions, now time.Time) {
	status := KubeletStatus(m, opts.KubeletVersion, now)
	if opts.BareStatus {
		status = BareKubeletStatus(status)
	}

	conditions := status.Conditions
	status.Conditions, status.Addresses = node.Status.Conditions, node.Status.Addresses

	if len(status.Addresses) == 0 {
		status.Addresses = KubeletFirstAddresses(m)
	}

	node.Status = status

	for _, cond := range conditions {
		setCondition(node, cond, now)
	}
}

func setReadyCondition(node *corev1.Node, ready bool, now time.Time) {
	setCondition(node, readyCondition(ready), now)
}

// setCondition sets a condition, keeping its transition time when the status does not change.
func setCondition(node *corev1.Node, cond corev1.NodeCondition, now time.Time) {
	cond.LastHeartbeatTime = metav1.NewTime(now)
	cond.LastTransitionTime = metav1.NewTime(now)

	for i, existing := range node.Status.Conditions {
		if existing.Type != cond.Type {
			continue
		}

		if existing.Status == cond.Status {
			cond.LastTransitionTime = existing.LastTransitionTime
		}

		node.Status.Conditions[i] = cond

		return
	}

	node.Status.Conditions = append(node.Status.Conditions, cond)
}

func hasTaint(node *corev1.Node, key string) bool {
	for _, taint := range node.Spec.Taints {
		if taint.Key == key {
			return true
		}
	}

	return false
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails.

	return hex.EncodeToString(b)
}
