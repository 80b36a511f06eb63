package ipam

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/iprange"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
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
	// Class is spec.loadBalancerClass: only Services without one or with LoadBalancerClass are served.
	Class string
	// LoadBalancerIP is spec.loadBalancerIP.
	LoadBalancerIP string
	// Annotations are the talos-ccm.dev/ annotations.
	Annotations map[string]string
	// Families are spec.ipFamilies ("IPv4", "IPv6"), in order.
	Families []string
	// Ports are the Service's ports, PROTOCOL/PORT.
	Ports []string
	// IngressIPs are the IPs of status.loadBalancer.ingress.
	IngressIPs []string
}

// ServiceIPInput is everything a LoadBalancer IP plan is made of.
type ServiceIPInput struct {
	Now time.Time
	// Pools are loadBalancer.pools of the config file, in order.
	Pools    []*specs.LoadBalancerPoolConfig
	Services []ServiceFacts
	// Previous are the allocations of the last plan (persisted), by ID.
	Previous map[string]*specs.IPAllocationSpec
}

// ServiceIPPlan is the complete set of LoadBalancer IP allocations and pools: IDs that are not in it are
// released.
type ServiceIPPlan struct {
	Allocations map[string]*specs.IPAllocationSpec
	Pools       map[string]*specs.IPPoolSpec
}

// lbPool is one config pool of one family.
type lbPool struct {
	*pool
	config   *specs.LoadBalancerPoolConfig
	selector labels.Selector
}

// ipHolder is one Service holding an IP.
type ipHolder struct {
	service    string
	sharingKey string
	ports      []string
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
}

// PlanServiceIPs decides the LoadBalancer IP of every family of every Service talos-ccm serves, in four
// passes, each over the Services from the oldest:
//
//  1. an IP the previous plan held for the Service is kept while it still fits (same Service, in a pool
//     that matches it, still what it asks for, still shareable);
//  2. an IP the Service already has in status.loadBalancer.ingress is taken back when it is free and in a
//     matching pool (the state was lost, the Service was not);
//  3. a requested IP (spec.loadBalancerIP or the talos-ccm.dev/load-balancer-ips annotation) is given when
//     it is in a matching pool and free, or held only by Services with the same sharing key and other
//     ports; otherwise it is rejected with the reason;
//  4. any other family gets the IP of a Service with the same sharing key it can share, else the lowest
//     free IP of the first matching pool that has one.
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

		for _, family := range serviceFamilies(svc) {
			tasks = append(tasks, serviceTask{svc: svc, family: family, id: ipam.ServiceAllocationID(svc.Key, family)})
		}
	}

	for _, pass := range []func(serviceTask){p.keepPrevious, p.adoptIngress, p.honourRequest, p.allocate} {
		for _, t := range tasks {
			if _, ok := p.decided[t.id]; !ok {
				pass(t)
			}
		}
	}

	plan := ServiceIPPlan{Allocations: map[string]*specs.IPAllocationSpec{}, Pools: map[string]*specs.IPPoolSpec{}}

	for _, t := range tasks {
		alloc := p.decided[t.id]
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

	return plan
}

// LoadBalancerPoolID is the ID of the IPPool of one family of a config pool.
func LoadBalancerPoolID(name, family string) string {
	return "lb/" + name + "/" + family
}

func (p *servicePlanner) buildPools() {
	for _, cfg := range p.in.Pools {
		byFamily := map[string][]iprange.Range{}

		for _, a := range cfg.GetAddresses() {
			r, err := iprange.Parse(a)
			if err != nil {
				continue // validated with the config file
			}

			byFamily[ipam.FamilyOf(r.First())] = append(byFamily[ipam.FamilyOf(r.First())], r)
		}

		var selector labels.Selector

		invalid := ""

		if sel := cfg.GetServiceSelector(); sel != nil {
			var err error

			if selector, err = metav1.LabelSelectorAsSelector(config.LabelSelector(sel)); err != nil {
				invalid = fmt.Sprintf("invalid serviceSelector: %v", err)
			}
		}

		for _, family := range []string{ipam.FamilyIPv4, ipam.FamilyIPv6} {
			ranges := byFamily[family]
			if len(ranges) == 0 {
				continue
			}

			slices.SortFunc(ranges, func(a, b iprange.Range) int { return a.First().Compare(b.First()) })

			bits := 32
			if family == ipam.FamilyIPv6 {
				bits = 128
			}

			pl := newPool(LoadBalancerPoolID(cfg.GetName(), family), ipam.PurposeLoadBalancerIP, family, bits)
			pl.ranges = ranges
			pl.source = "loadBalancer.pools " + cfg.GetName()
			pl.invalid = invalid

			p.pools = append(p.pools, &lbPool{pool: pl, config: cfg, selector: selector})
		}
	}
}

// ipMode is the ipMode of the Services that hold an IP of the pool with this ID: VIP unless the pool says
// Proxy.
func (p *servicePlanner) ipMode(poolID string) string {
	for _, pl := range p.pools {
		if pl.id == poolID {
			return cmp.Or(pl.config.GetIpMode(), ipam.IPModeVIP)
		}
	}

	return ipam.IPModeVIP
}

func (pl *lbPool) matches(svc *ServiceFacts) bool {
	if pl.invalid != "" {
		return false
	}

	if ns := pl.config.GetNamespaces(); len(ns) > 0 && !slices.Contains(ns, svc.Namespace) {
		return false
	}

	return pl.selector == nil || pl.selector.Matches(labels.Set(svc.Labels))
}

// matching returns the pools of a family that match the Service, in order.
func (p *servicePlanner) matching(svc *ServiceFacts, family string) []*lbPool {
	var out []*lbPool

	for _, pl := range p.pools {
		if pl.family == family && pl.matches(svc) {
			out = append(out, pl)
		}
	}

	return out
}

// poolOf returns the pool among pools that holds ip, preferring the one named prefer.
func poolOf(pools []*lbPool, ip netip.Addr, prefer string) *lbPool {
	var found *lbPool

	for _, pl := range pools {
		if !slices.ContainsFunc(pl.ranges, func(r iprange.Range) bool { return r.Contains(ip) }) {
			continue
		}

		if pl.id == prefer {
			return pl
		}

		if found == nil {
			found = pl
		}
	}

	return found
}

// serviceFamilies are the families a Service gets an IP of: those of spec.ipFamilies.
func serviceFamilies(svc *ServiceFacts) []string {
	var out []string

	for _, f := range svc.Families {
		family := strings.ToLower(f)
		if (family == ipam.FamilyIPv4 || family == ipam.FamilyIPv6) && !slices.Contains(out, family) {
			out = append(out, family)
		}
	}

	if len(out) == 0 {
		out = []string{ipam.FamilyIPv4}
	}

	return out
}

func sharingKey(svc *ServiceFacts) string {
	return strings.TrimSpace(svc.Annotations[ipam.AnnotationSharingKey])
}

// parseRequests reads the IPs a Service asks for, at most one per family.
func (p *servicePlanner) parseRequests(svc *ServiceFacts) {
	values := []string{svc.LoadBalancerIP}
	values = append(values, strings.FieldsFunc(svc.Annotations[ipam.AnnotationLoadBalancerIPs], func(r rune) bool { return r == ',' || r == ' ' })...)

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

// shareable says why ip cannot be held by svc too; empty when it can (it is free, or held only by Services
// with svc's sharing key on other ports).
func (p *servicePlanner) shareable(ip netip.Addr, svc *ServiceFacts) string {
	key := sharingKey(svc)

	for _, h := range p.holders[ip] {
		if h.service == svc.Key {
			continue
		}

		switch {
		case key == "" || h.sharingKey == "":
			return fmt.Sprintf("%s is held by Service %s (Services share an IP only with the same %s annotation)", ip, h.service, ipam.AnnotationSharingKey)
		case h.sharingKey != key:
			return fmt.Sprintf("%s is held by Service %s with another sharing key", ip, h.service)
		}

		for _, port := range svc.Ports {
			if slices.Contains(h.ports, port) {
				return fmt.Sprintf("%s is shared with Service %s, which already uses port %s", ip, h.service, port)
			}
		}
	}

	return ""
}

func (p *servicePlanner) take(t serviceTask, pl *lbPool, ip netip.Addr, origin string) {
	p.holders[ip] = append(p.holders[ip], ipHolder{service: t.svc.Key, sharingKey: sharingKey(t.svc), ports: t.svc.Ports})

	if _, held := pl.taken[ip]; !held {
		pl.taken[ip] = "Service/" + t.svc.Key
	}

	p.decided[t.id] = &specs.IPAllocationSpec{State: ipam.StateAllocated, Address: ip.String(), Pool: pl.id, Origin: origin}
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

	pl := poolOf(p.matching(t.svc, t.family), ip, prev.GetPool())
	if pl == nil || p.shareable(ip, t.svc) != "" {
		return
	}

	p.take(t, pl, ip, cmp.Or(prev.GetOrigin(), ipam.OriginAllocated))
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

		if pl := poolOf(p.matching(t.svc, t.family), ip, ""); pl != nil && p.shareable(ip, t.svc) == "" {
			p.take(t, pl, ip, ipam.OriginIngress)
		}

		return
	}
}

func (p *servicePlanner) honourRequest(t serviceTask) {
	if why := p.requestErrors[t.svc.Key]; why != "" {
		p.decided[t.id] = &specs.IPAllocationSpec{State: ipam.StateFailed, Origin: ipam.OriginRequested, Reason: why}

		return
	}

	ip, ok := p.requests[t.svc.Key][t.family]
	if !ok {
		return
	}

	pools := p.matching(t.svc, t.family)

	pl := poolOf(pools, ip, "")
	if pl == nil {
		p.decided[t.id] = &specs.IPAllocationSpec{
			State: ipam.StateFailed, Origin: ipam.OriginRequested,
			Reason: fmt.Sprintf("the requested IP %s is not in a load balancer pool that matches the Service%s", ip, poolNames(pools)),
		}

		return
	}

	if why := p.shareable(ip, t.svc); why != "" {
		p.decided[t.id] = &specs.IPAllocationSpec{State: ipam.StateFailed, Origin: ipam.OriginRequested, Pool: pl.id, Reason: "the requested IP " + why}

		return
	}

	p.take(t, pl, ip, ipam.OriginRequested)
}

func (p *servicePlanner) allocate(t serviceTask) {
	pools := p.matching(t.svc, t.family)

	if len(pools) == 0 {
		reason := "no load balancer pool of " + t.family + " matches the Service"
		if len(p.pools) == 0 {
			reason = "no load balancer pool is configured (loadBalancer.pools in the config file)"
		}

		p.decided[t.id] = &specs.IPAllocationSpec{State: ipam.StateFailed, Reason: reason}

		return
	}

	if sharingKey(t.svc) != "" {
		for _, ip := range slices.SortedFunc(maps.Keys(p.holders), netip.Addr.Compare) {
			if ipam.FamilyOf(ip) != t.family || !slices.ContainsFunc(p.holders[ip], func(h ipHolder) bool { return h.sharingKey == sharingKey(t.svc) }) {
				continue
			}

			if pl := poolOf(pools, ip, ""); pl != nil && p.shareable(ip, t.svc) == "" {
				p.take(t, pl, ip, ipam.OriginShared)

				return
			}
		}
	}

	for _, pl := range pools {
		if b, _, ok := pl.free(0); ok {
			p.take(t, pl, b, ipam.OriginAllocated)

			return
		}

		pl.exhausted = true
	}

	p.decided[t.id] = &specs.IPAllocationSpec{
		State:  ipam.StateFailed,
		Reason: "every load balancer pool that matches the Service is exhausted" + poolNames(pools),
	}
}

func poolNames(pools []*lbPool) string {
	if len(pools) == 0 {
		return ""
	}

	names := make([]string, len(pools))
	for i, pl := range pools {
		names[i] = pl.config.GetName()
	}

	return " (" + strings.Join(names, ", ") + ")"
}
