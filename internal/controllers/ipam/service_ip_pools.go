package ipam

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/iprange"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// lbPool is one config pool of one family.
type lbPool struct {
	*pool
	config *specs.LoadBalancerPoolConfig
	// selector is the serviceSelector and namespaces the namespaceSelector, nil when not set.
	selector, namespaces labels.Selector
}

// LoadBalancerPoolID is the ID of the IPPool of one family of a config pool.
func LoadBalancerPoolID(name, family string) string {
	return "lb/" + name + "/" + family
}

func (p *servicePlanner) buildPools() {
	for _, cfg := range p.in.Pools {
		byFamily := map[string][]iprange.Range{}
		ends := map[string][]netip.Prefix{}

		for _, a := range cfg.GetAddresses() {
			r, err := iprange.Parse(a)
			if err != nil {
				continue // validated with the config file
			}

			family := ipam.FamilyOf(r.First())
			byFamily[family] = append(byFamily[family], r)

			if !cfg.GetAllowFirstLastIps() && strings.Contains(a, "/") {
				ends[family] = append(ends[family], cidrEnds(r)...)
			}
		}

		selector, invalid := poolSelector(cfg.GetServiceSelector(), "serviceSelector")
		namespaces, invalidNamespaces := poolSelector(cfg.GetNamespaceSelector(), "namespaceSelector")
		invalid = cmp.Or(invalid, invalidNamespaces)

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
			pl.excluded = ends[family]

			p.pools = append(p.pools, &lbPool{pool: pl, config: cfg, selector: selector, namespaces: namespaces})
		}
	}

	// The highest priority first; pools of one priority keep their order.
	slices.SortStableFunc(p.pools, func(a, b *lbPool) int { return cmp.Compare(b.config.GetPriority(), a.config.GetPriority()) })
}

// poolSelector converts a selector of a pool (what names its key), nil when not set; invalid says why it
// cannot be used (the config file checks selectors, so only a config written by an embedder has one).
func poolSelector(sel *specs.LabelSelector, what string) (selector labels.Selector, invalid string) {
	if sel == nil {
		return nil, ""
	}

	selector, err := metav1.LabelSelectorAsSelector(config.LabelSelector(sel))
	if err != nil {
		return nil, fmt.Sprintf("invalid %s: %v", what, err)
	}

	return selector, ""
}

// ipMode is the ipMode of the Services that hold an IP of the pool with this ID: VIP unless the pool says
// Proxy.
func (p *servicePlanner) ipMode(poolID string) string {
	if pl := poolByID(p.pools, poolID); pl != nil {
		return cmp.Or(pl.config.GetIpMode(), ipam.IPModeVIP)
	}

	return ipam.IPModeVIP
}

// cidrEnds returns the first and last address of a CIDR as single-address prefixes: many L2 networks and
// routers drop traffic to an IPv4 network or broadcast address, the first address of an IPv6 subnet is its
// subnet-router anycast (RFC 4291), and its last ones are reserved anycast addresses (RFC 2526). A CIDR of
// one or two addresses has no such ends and keeps both.
func cidrEnds(r iprange.Range) []netip.Prefix {
	bits := r.First().BitLen()
	if p, ok := r.Prefix(); !ok || p.Bits() > bits-2 {
		return nil
	}

	return []netip.Prefix{netip.PrefixFrom(r.First(), bits), netip.PrefixFrom(r.Last(), bits)}
}

// reservedEnd says why the pool does not hand out ip when it is the first or last address of one of its
// CIDRs; empty otherwise.
func (pl *lbPool) reservedEnd(ip netip.Addr) string {
	if _, ok := pl.excludedBy(netip.PrefixFrom(ip, ip.BitLen())); !ok {
		return ""
	}

	return fmt.Sprintf("%s is the first or last address of a CIDR of pool %s, which it does not hand out "+
		"(network, broadcast or subnet-router anycast address; allowFirstLastIPs: true hands them out)", ip, pl.config.GetName())
}

// poolUse says what pools are looked up for.
type poolUse int

const (
	// forNew: an IP the Service does not hold yet, chosen by talos-ccm; disabled and draining pools hand out
	// nothing new, and a pool with autoAssign false serves only Services that name it.
	forNew poolUse = iota
	// forRequest: an IP the Service asks for; as forNew, but any pool may serve it.
	forRequest
	// forKeeping: an IP the Service holds; a disabled pool keeps what it assigned, a draining one does not.
	forKeeping
)

// serves reports whether the pool may give or keep an IP for a use, to a Service that names pools or not.
func (pl *lbPool) serves(use poolUse, named bool) bool {
	switch {
	case pl.config.GetDrain():
		return false
	case use == forKeeping:
		return true
	case pl.config.GetDisabled():
		return false
	default:
		return use == forRequest || named || autoAssign(pl.config)
	}
}

// autoAssign reports whether a pool hands out IPs to Services that do not ask for them (the default).
func autoAssign(cfg *specs.LoadBalancerPoolConfig) bool {
	return cfg.AutoAssign == nil || cfg.GetAutoAssign()
}

// requestedPools are the names of the pools a Service asks for with AnnotationLoadBalancerPool.
func requestedPools(svc *ServiceFacts) []string {
	return strings.FieldsFunc(svc.Annotations[kubekeys.AnnotationLoadBalancerPool], func(r rune) bool { return r == ',' || r == ' ' })
}

func (pl *lbPool) matches(svc *ServiceFacts) bool {
	if pl.invalid != "" {
		return false
	}

	// The namespaces a pool serves are those it lists and those whose labels its namespaceSelector matches.
	listed := pl.config.GetNamespaces()
	if (len(listed) > 0 || pl.namespaces != nil) && !slices.Contains(listed, svc.Namespace) &&
		(pl.namespaces == nil || !pl.namespaces.Matches(labels.Set(svc.NamespaceLabels))) {
		return false
	}

	return pl.selector == nil || pl.selector.Matches(labels.Set(svc.Labels))
}

// matching returns the pools of a family that match the Service and serve the use, in order: only those it
// names, when it names pools.
func (p *servicePlanner) matching(svc *ServiceFacts, family string, use poolUse) []*lbPool {
	var out []*lbPool

	named := requestedPools(svc)

	for _, pl := range p.pools {
		if len(named) > 0 && !slices.Contains(named, pl.config.GetName()) {
			continue
		}

		if pl.family == family && pl.serves(use, len(named) > 0) && pl.matches(svc) {
			out = append(out, pl)
		}
	}

	return out
}

// poolByID returns the pool with this ID, nil when there is none.
func poolByID(pools []*lbPool, id string) *lbPool {
	for _, pl := range pools {
		if pl.id == id {
			return pl
		}
	}

	return nil
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
