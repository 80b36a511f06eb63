package ipam

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// ServiceFacts is what the LoadBalancer IP plan knows of one Service of type LoadBalancer.
type ServiceFacts struct {
	Created time.Time
	// Key is NAMESPACE/NAME.
	Key       string
	Namespace string
	UID       string
	Labels    map[string]string
	// NamespaceLabels are the labels of the Service's namespace, for the pools' namespaceSelector.
	NamespaceLabels map[string]string
	// Class is spec.loadBalancerClass: only Services without one or with LoadBalancerClass are served.
	Class string
	// LoadBalancerIP is spec.loadBalancerIP.
	LoadBalancerIP string
	// Annotations are the talos-ccm.dev/ annotations.
	Annotations map[string]string
	// Families are spec.ipFamilies ("IPv4", "IPv6"), in order, and IPFamilyPolicy spec.ipFamilyPolicy.
	Families       []string
	IPFamilyPolicy string
	// Ports are the Service's ports, PROTOCOL/PORT.
	Ports []string
	// IngressIPs are the IPs of status.loadBalancer.ingress.
	IngressIPs []string
	// ExternalTrafficPolicy is spec.externalTrafficPolicy (Cluster when empty) and Selector spec.selector:
	// Services share an IP only with the same policy and, for Local, the same selector.
	ExternalTrafficPolicy string
	Selector              map[string]string
}

// ServiceIPInput is everything a LoadBalancer IP plan is made of.
type ServiceIPInput struct {
	Now time.Time
	// Pools are loadBalancer.pools of the config file, in order.
	Pools []*specs.LoadBalancerPoolConfig
	// RequestAnnotations are loadBalancer.requestAnnotations of the config file: the other load balancers
	// whose IP-request annotations are read too.
	RequestAnnotations []string
	Services           []ServiceFacts
	// Previous are the allocations of the last plan (persisted), by ID.
	Previous map[string]*specs.IPAllocationSpec
}

// ServiceIPPlan is the complete set of LoadBalancer IP allocations and pools: IDs that are not in it are
// released.
type ServiceIPPlan struct {
	Allocations map[string]*specs.IPAllocationSpec
	Pools       map[string]*specs.IPPoolSpec
}

// servicePlanner carries the state of one PlanServiceIPs call.
type servicePlanner struct {
	in       ServiceIPInput
	pools    []*lbPool
	holders  map[netip.Addr][]ipHolder
	decided  map[string]*specs.IPAllocationSpec
	requests map[string]map[string]netip.Addr
	// requestErrors says why a Service's requested IPs are unusable.
	requestErrors map[string]string
}

// serviceTask is one family of one Service to decide.
type serviceTask struct {
	svc    *ServiceFacts
	family string
	id     string
	// optional is set on the second family of a PreferDualStack Service: without a pool that serves it,
	// the Service gets no allocation of it, rather than a failed one.
	optional bool
}

// PlanServiceIPs decides the LoadBalancer IP of every family of every Service talos-ccm serves, in four
// passes, each over the Services from the oldest:
//
//  1. an IP the previous plan held for the Service is kept while it still fits (same Service, still what it
//     asks for, still shareable): in a pool that matches it (a disabled pool included), or, when a pool
//     edit left it outside every such pool, outside them, with a warning (keepOutside); a share across
//     namespaces without the opt-in of both, or of Services of other traffic policies or selectors, is kept
//     too, with a warning, unless released (keepable);
//  2. an IP the Service already has in status.loadBalancer.ingress is taken back when it is free (the
//     state was lost, the Service was not), by the same rule;
//  3. a requested IP (spec.loadBalancerIP or the talos-ccm.dev/load-balancer-ips annotation) is given when
//     it is in a matching pool and free, or held only by Services with the same sharing key and other
//     ports; otherwise it is rejected with the reason;
//  4. any other family gets the IP of a Service with the same sharing key it can share, else the lowest
//     free IP of the first matching pool that has one (pools of a higher priority first; only the pools
//     the Service names, when it names some; a pool with autoAssign false only for those).
//
// A pool never hands out the first and last address of its CIDRs unless it allows them; a Service that
// holds one keeps it, with a warning. Disabled and draining pools hand out nothing new; a draining pool
// keeps nothing either.
func PlanServiceIPs(in ServiceIPInput) ServiceIPPlan {
	p := &servicePlanner{
		in:            in,
		holders:       map[netip.Addr][]ipHolder{},
		decided:       map[string]*specs.IPAllocationSpec{},
		requests:      map[string]map[string]netip.Addr{},
		requestErrors: map[string]string{},
	}

	p.buildPools()

	services := make([]*ServiceFacts, 0, len(in.Services))

	for i := range in.Services {
		if ipam.Serves(in.Services[i].Class) {
			services = append(services, &in.Services[i])
		}
	}

	slices.SortFunc(services, func(a, b *ServiceFacts) int { return byAge(a.Created, b.Created, a.Key, b.Key) })

	var tasks []serviceTask

	for _, svc := range services {
		p.parseRequests(svc)

		for i, family := range serviceFamilies(svc) {
			tasks = append(tasks, serviceTask{
				svc: svc, family: family, id: ipam.ServiceAllocationID(svc.Key, family),
				optional: i > 0 && svc.IPFamilyPolicy == string(corev1.IPFamilyPolicyPreferDualStack),
			})
		}
	}

	passes := []func(serviceTask){p.keepPrevious, p.adoptIngress, p.honourShownRequest, p.honourRequest, p.allocate}

	for i, pass := range passes {
		start := 0

		for j, t := range tasks {
			if _, ok := p.decided[t.id]; !ok {
				pass(t)
			}

			if j+1 < len(tasks) && tasks[j+1].svc == t.svc {
				continue
			}

			// Every family of the Service is decided once the last pass saw its last one: a RequireDualStack
			// Service that did not get them all gives back at once what it took, so that the younger Services
			// may take it in this plan.
			if i == len(passes)-1 {
				p.requireDualStack(tasks[start : j+1])
			}

			start = j + 1
		}
	}

	p.flagKeptShares(tasks)

	plan := ServiceIPPlan{Allocations: map[string]*specs.IPAllocationSpec{}, Pools: map[string]*specs.IPPoolSpec{}}

	for _, t := range tasks {
		alloc := p.decided[t.id]
		if alloc == nil {
			continue // a family the Service only prefers, which no pool serves
		}
		alloc.Purpose, alloc.Owner, alloc.OwnerUid, alloc.Family = ipam.PurposeLoadBalancerIP, "Service/"+t.svc.Key, t.svc.UID, t.family
		alloc.SharingKey, alloc.Ports = sharingKey(t.svc), t.svc.Ports

		if alloc.GetAddress() != "" {
			alloc.IpMode = p.ipMode(alloc.GetPool())
		}

		plan.Allocations[t.id] = withSince(alloc, p.in.Previous[t.id], p.in.Now)
	}

	for _, pl := range p.pools {
		plan.Pools[pl.id] = poolSpec(pl.pool)
	}

	countRefused(plan)

	return plan
}

// parseRequests reads the IPs a Service asks for, at most one per family.
func (p *servicePlanner) parseRequests(svc *ServiceFacts) {
	annotations := []string{kubekeys.AnnotationLoadBalancerIPs}

	for _, source := range p.in.RequestAnnotations {
		switch source {
		case ipam.RequestAnnotationsMetalLB:
			annotations = append(annotations, kubekeys.AnnotationMetalLBIPs)
		case ipam.RequestAnnotationsCilium:
			annotations = append(annotations, kubekeys.AnnotationCiliumIPs)
		}
	}

	values := []string{svc.LoadBalancerIP}
	for _, a := range annotations {
		values = append(values, strings.FieldsFunc(svc.Annotations[a], func(r rune) bool { return r == ',' || r == ' ' })...)
	}

	requests := map[string]netip.Addr{}

	for _, v := range values {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}

		ip, err := netip.ParseAddr(v)
		if err != nil || ip.Zone() != "" {
			p.requestErrors[svc.Key] = fmt.Sprintf("the requested IP %q is not an IP address", v)

			continue
		}

		ip = ip.Unmap()
		family := ipam.FamilyOf(ip)

		if prev, ok := requests[family]; ok && prev != ip {
			p.requestErrors[svc.Key] = fmt.Sprintf("two %s IPs are requested (%s, %s): one per family is allowed", family, prev, ip)

			continue
		}

		requests[family] = ip
	}

	p.requests[svc.Key] = requests
}

func (p *servicePlanner) take(t serviceTask, pl *lbPool, ip netip.Addr, origin string) *specs.IPAllocationSpec {
	h := holderOf(t.svc)
	h.heldBefore = slices.Contains(p.ipsHeldBefore(t.svc), ip)
	p.holders[ip] = append(p.holders[ip], h)

	alloc := &specs.IPAllocationSpec{State: ipam.StateAllocated, Address: ip.String(), Origin: origin}

	if pl != nil {
		if _, held := pl.taken[ip]; !held {
			pl.taken[ip] = "Service/" + t.svc.Key
		}

		alloc.Pool = pl.id
	}

	p.decided[t.id] = alloc

	return alloc
}

// keep takes an IP the Service already holds (in the previous plan or in its status) from a pool that
// matches it; an address the pool does not hand out any more is kept with a warning.
func (p *servicePlanner) keep(t serviceTask, pl *lbPool, ip netip.Addr, origin string) {
	alloc := p.take(t, pl, ip, origin)

	if why := pl.reservedEnd(ip); why != "" {
		alloc.Warning = ipam.WarningReservedAddress
		alloc.Reason = "the Service keeps its IP: " + why
	}
}

// keepOutside keeps an IP the Service holds although no pool that matches it holds the IP (a pool was
// shrunk, removed, disabled, or narrowed to other Services): the IP is never taken away silently. It stays
// reserved for the Service, with a warning, until the Service asks for another IP, the operator releases
// it with AnnotationReleaseLoadBalancerIP, or the pool it came from (poolID) drains. It reports whether the
// IP was kept.
func (p *servicePlanner) keepOutside(t serviceTask, ip netip.Addr, poolID, origin string) bool {
	if released(t.svc) {
		return false
	}

	var family []*lbPool

	for _, pl := range p.pools {
		if pl.family == t.family {
			family = append(family, pl)
		}
	}

	// The pool whose ranges hold the IP, if any, keeps it from being handed to another Service.
	pl := poolOf(family, ip, poolID)
	if from := poolByID(p.pools, poolID); (from != nil && from.config.GetDrain()) || (pl != nil && pl.config.GetDrain()) {
		return false
	}

	// A Service that names pools other than the one its IP came from asks to move.
	if named := requestedPools(t.svc); len(named) > 0 {
		from := poolByID(p.pools, poolID)
		if from == nil {
			from = pl
		}

		if from == nil || !slices.Contains(named, from.config.GetName()) {
			return false
		}
	}

	if p.keepable(ip, t.svc) != "" {
		return false
	}

	alloc := p.take(t, pl, ip, origin)
	if alloc.Pool == "" {
		alloc.Pool = poolID
	}

	alloc.Warning = ipam.WarningOutsidePools
	alloc.Reason = fmt.Sprintf("the Service keeps %s, which is outside every load balancer pool that may serve it now%s "+
		"(a pool was changed, disabled or removed, or the namespace's labels changed); nobody else gets it. To move the "+
		"Service to a new IP, annotate it %s: \"true\" or drain the pool it came from",
		ip, poolNames(p.matching(t.svc, t.family, forNew)), kubekeys.AnnotationReleaseLoadBalancerIP)

	return true
}

func (p *servicePlanner) keepPrevious(t serviceTask) {
	prev := p.in.Previous[t.id]
	if prev.GetState() != ipam.StateAllocated || prev.GetOwnerUid() != t.svc.UID || p.requestErrors[t.svc.Key] != "" {
		return
	}

	ip, err := netip.ParseAddr(prev.GetAddress())
	if err != nil || ipam.FamilyOf(ip) != t.family {
		return
	}

	if req, ok := p.requests[t.svc.Key][t.family]; ok && req != ip {
		return // the Service asks for another IP now
	}

	origin := cmp.Or(prev.GetOrigin(), ipam.OriginAllocated)

	if pl := poolOf(p.matching(t.svc, t.family, forKeeping), ip, prev.GetPool()); pl != nil {
		if p.keepable(ip, t.svc) == "" {
			p.keep(t, pl, ip, origin)
		}

		return
	}

	p.keepOutside(t, ip, prev.GetPool(), origin)
}

func (p *servicePlanner) adoptIngress(t serviceTask) {
	if _, requested := p.requests[t.svc.Key][t.family]; requested || p.requestErrors[t.svc.Key] != "" {
		return
	}

	for _, s := range t.svc.IngressIPs {
		ip, err := netip.ParseAddr(s)
		if err != nil || ipam.FamilyOf(ip.Unmap()) != t.family {
			continue
		}

		ip = ip.Unmap()

		if pl := poolOf(p.matching(t.svc, t.family, forKeeping), ip, ""); pl != nil {
			if p.keepable(ip, t.svc) == "" {
				p.keep(t, pl, ip, ipam.OriginIngress)
			}

			return
		}

		// Outside every pool that may serve the Service: kept only when the state was lost (no previous
		// allocation), as the previous plan would have kept it; an IP just released stays released.
		if _, known := p.in.Previous[t.id]; !known {
			p.keepOutside(t, ip, "", ipam.OriginIngress)
		}

		return
	}
}

// honourShownRequest honours the requests of the Services that already show the IP they ask for, before any
// other request: a Service that asks for an IP another Service shows in its status (held before this plan)
// must find it held, whichever of the two is older.
func (p *servicePlanner) honourShownRequest(t serviceTask) {
	if ip, ok := p.requests[t.svc.Key][t.family]; ok && showsIP(t.svc, ip) {
		p.honourRequest(t)
	}
}

// showsIP reports whether the Service shows ip in its status.loadBalancer.ingress.
func showsIP(svc *ServiceFacts, ip netip.Addr) bool {
	return slices.ContainsFunc(svc.IngressIPs, func(s string) bool { a, err := netip.ParseAddr(s); return err == nil && a.Unmap() == ip })
}

func (p *servicePlanner) honourRequest(t serviceTask) {
	if why := p.requestErrors[t.svc.Key]; why != "" {
		p.decided[t.id] = failure(ipam.CauseIPRejected, why)

		return
	}

	ip, ok := p.requests[t.svc.Key][t.family]
	if !ok {
		return
	}

	// A Service that already shows the IP it asks for holds it: a disabled pool keeps it.
	use := forRequest
	if showsIP(t.svc, ip) {
		use = forKeeping
	}

	pools := p.matching(t.svc, t.family, use)

	pl := poolOf(pools, ip, "")
	if pl == nil {
		p.decided[t.id] = failure(ipam.CauseIPRejected,
			fmt.Sprintf("the requested IP %s is not in a load balancer pool that matches the Service%s", ip, poolNames(pools)))

		return
	}

	// An address the pool does not hand out is not handed out on request either, unless Services hold it
	// already (kept from before) and the request is to share it.
	why := p.shareable(ip, t.svc)
	if use == forKeeping {
		why = p.keepable(ip, t.svc)
	}

	if why == "" && use == forRequest && len(p.holders[ip]) == 0 {
		why = pl.reservedEnd(ip)
	}

	if why != "" {
		p.decided[t.id] = failure(ipam.CauseIPRejected, "the requested IP "+why, pl)
		p.decided[t.id].Pool = pl.id

		return
	}

	p.keep(t, pl, ip, ipam.OriginRequested)
}

func (p *servicePlanner) allocate(t serviceTask) {
	pools := p.matching(t.svc, t.family, forNew)

	if len(pools) == 0 {
		if t.optional {
			p.decided[t.id] = nil

			return
		}

		reason := "no load balancer pool of " + t.family + " matches the Service"
		if named := requestedPools(t.svc); len(named) > 0 {
			reason = fmt.Sprintf("no load balancer pool of %s named in %s (%s) matches the Service", t.family,
				kubekeys.AnnotationLoadBalancerPool, strings.Join(named, ", "))
		}
		if len(p.pools) == 0 {
			reason = "no load balancer pool is configured (loadBalancer.pools in the config file)"
		}

		p.decided[t.id] = failure(ipam.CauseNoPoolMatches, reason)

		return
	}

	// Why the IPs of Services with the same sharing key could not be shared, for the reason of a new IP.
	var refused []string

	if sharingKey(t.svc) != "" {
		for _, ip := range slices.SortedFunc(maps.Keys(p.holders), netip.Addr.Compare) {
			if ipam.FamilyOf(ip) != t.family || !slices.ContainsFunc(p.holders[ip], func(h ipHolder) bool { return h.sharingKey == sharingKey(t.svc) }) {
				continue
			}

			pl := poolOf(pools, ip, "")
			if pl == nil {
				continue
			}

			why := p.shareable(ip, t.svc)
			if why == "" {
				p.take(t, pl, ip, ipam.OriginShared)

				return
			}

			refused = append(refused, why)
		}
	}

	for _, pl := range pools {
		if b, _, ok := pl.free(0); ok {
			alloc := p.take(t, pl, b, ipam.OriginAllocated)
			if len(refused) > 0 {
				alloc.Reason = "a new IP, as no IP with the same sharing key may be shared: " + strings.Join(refused, "; ")
			}

			return
		}

		pl.exhausted = true
	}

	p.decided[t.id] = failure(ipam.CausePoolsExhausted, "every load balancer pool that matches the Service is exhausted"+poolNames(pools), pools...)
}

// failure returns a failed allocation with its cause, for code to read, and its reason, for people; refused
// are the pools that refused it. A failed request has the origin requested, as the IP it names is the
// Service's, not talos-ccm's choice.
func failure(cause, reason string, refused ...*lbPool) *specs.IPAllocationSpec {
	alloc := &specs.IPAllocationSpec{State: ipam.StateFailed, Cause: cause, Reason: reason}
	if cause == ipam.CauseIPRejected {
		alloc.Origin = ipam.OriginRequested
	}

	for _, pl := range refused {
		alloc.RefusedPools = append(alloc.RefusedPools, pl.id)
	}

	return alloc
}

// countRefused sets in each pool of the plan how many of its failed allocations name it in refusedPools.
func countRefused(plan ServiceIPPlan) {
	for _, alloc := range plan.Allocations {
		if alloc.GetState() != ipam.StateFailed {
			continue
		}

		for _, id := range alloc.GetRefusedPools() {
			if pool := plan.Pools[id]; pool != nil {
				pool.Refused++
			}
		}
	}
}
