package configfile

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/iprange"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// Known keys of the loadBalancer section.
var (
	loadBalancerKeys = []string{"pools", "requestAnnotations"}
	lbPoolKeys       = []string{
		"name", "addresses", "namespaces", "namespaceSelector", "serviceSelector", "allowFirstLastIPs", "disabled", "drain", "ipMode",
		"autoAssign", "priority",
	}
	labelSelectorKeys    = []string{"matchLabels", "matchExpressions"}
	labelRequirementKeys = []string{"key", "operator", "values"}
)

// requestAnnotationSources are the values of loadBalancer.requestAnnotations: the load balancers whose
// IP-request annotations talos-ccm can read.
var requestAnnotationSources = []string{ipam.RequestAnnotationsMetalLB, ipam.RequestAnnotationsCilium}

// ipModes are the values of a pool's ipMode, as Kubernetes spells them in status.loadBalancer.ingress.
var ipModes = []string{ipam.IPModeVIP, ipam.IPModeProxy}

// lbRange is one parsed entry of a pool's addresses, for the overlap check.
type lbRange struct {
	first, last netip.Addr
	pool        string
	line        int
}

// loadBalancer reads `loadBalancer`: the pools LoadBalancer IPs come from.
func (p *parser) loadBalancer(n *yaml.Node) *specs.LoadBalancerConfig {
	out := &specs.LoadBalancerConfig{}
	names := map[string]int{}

	var ranges []lbRange

	p.mapping(n, "loadBalancer", loadBalancerKeys, func(key string, _, v *yaml.Node) {
		if key == "requestAnnotations" {
			p.sequence(v, "loadBalancer.requestAnnotations", func(i int, item *yaml.Node) {
				source, vn, ok := p.scalar(item, fmt.Sprintf("loadBalancer.requestAnnotations[%d]", i))
				if !ok {
					return
				}

				if !slices.Contains(requestAnnotationSources, source) {
					p.problem(vn, "loadBalancer.requestAnnotations[%d]: %q is neither %s", i, source, strings.Join(requestAnnotationSources, " nor "))

					return
				}

				out.RequestAnnotations = append(out.RequestAnnotations, source)
			})

			return
		}

		p.sequence(v, "loadBalancer.pools", func(i int, item *yaml.Node) {
			item = p.resolve(item)
			if item == nil {
				return
			}

			// The name comes first, whatever its place: every message about the pool carries it.
			p.rule = fmt.Sprintf("loadBalancer.pools[%d]", i)

			if item.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(item.Content); j += 2 {
					if k := item.Content[j]; k.Kind == yaml.ScalarNode && k.Value == "name" {
						if v := item.Content[j+1]; v.Kind == yaml.ScalarNode && v.Value != "" {
							p.rule = fmt.Sprintf("pool %q", v.Value)
						}
					}
				}
			}

			pool := &specs.LoadBalancerPoolConfig{Line: int32(min(item.Line, 1<<30))} //nolint:gosec // Bounded.
			ranges = append(ranges, p.lbPool(item, pool, names)...)
			out.Pools = append(out.Pools, pool)

			p.rule = ""
		})
	})

	p.checkOverlaps(ranges)

	return out
}

func (p *parser) lbPool(n *yaml.Node, pool *specs.LoadBalancerPoolConfig, names map[string]int) []lbRange {
	var ranges []lbRange

	p.mapping(n, "", lbPoolKeys, func(key string, _, v *yaml.Node) {
		switch key {
		case "name":
			name, vn, ok := p.scalar(v, "name")
			if !ok {
				return
			}

			if errs := content.IsDNS1123Label(name); len(errs) > 0 {
				p.problem(vn, "name %q is not a DNS label: %s", name, strings.Join(errs, "; "))

				return
			}

			if line, dup := names[name]; dup {
				p.problem(vn, "the name %q is already used by the pool on line %d", name, line)
			}

			names[name] = vn.Line
			pool.Name = name
		case "addresses":
			p.sequence(v, "addresses", func(i int, item *yaml.Node) {
				s, vn, ok := p.scalar(item, fmt.Sprintf("addresses[%d]", i))
				if !ok {
					return
				}

				r, err := iprange.Parse(s)
				if err != nil {
					p.problem(vn, "addresses[%d]: %v", i, err)

					return
				}

				// A range keeps its form even when it happens to be a CIDR: only CIDRs lose their first and
				// last addresses, and a range is used as written.
				written := r.String()
				if strings.Contains(s, "-") {
					written = r.First().String() + "-" + r.Last().String()
				}

				pool.Addresses = append(pool.Addresses, written)
				ranges = append(ranges, lbRange{first: r.First(), last: r.Last(), line: vn.Line})
			})
		case "namespaces":
			p.sequence(v, "namespaces", func(i int, item *yaml.Node) {
				ns, vn, ok := p.scalar(item, fmt.Sprintf("namespaces[%d]", i))
				if !ok {
					return
				}

				if errs := content.IsDNS1123Label(ns); len(errs) > 0 {
					p.problem(vn, "namespaces[%d]: %q is not a namespace name: %s", i, ns, strings.Join(errs, "; "))

					return
				}

				pool.Namespaces = append(pool.Namespaces, ns)
			})
		case "namespaceSelector":
			pool.NamespaceSelector = p.labelSelector(v, "namespaceSelector")
		case "serviceSelector":
			pool.ServiceSelector = p.labelSelector(v, "serviceSelector")
		case "allowFirstLastIPs":
			pool.AllowFirstLastIps, _ = p.boolean(v, "allowFirstLastIPs")
		case "disabled":
			pool.Disabled, _ = p.boolean(v, "disabled")
		case "drain":
			pool.Drain, _ = p.boolean(v, "drain")
		case "autoAssign":
			if auto, ok := p.boolean(v, "autoAssign"); ok {
				pool.AutoAssign = &auto
			}
		case "priority":
			vn := p.resolve(v)
			if vn == nil {
				return
			}

			var priority int32

			if vn.Kind != yaml.ScalarNode || vn.ShortTag() != "!!int" || vn.Decode(&priority) != nil {
				p.problem(vn, "priority must be a whole number")

				return
			}

			pool.Priority = priority
		case "ipMode":
			mode, vn, ok := p.scalar(v, "ipMode")
			if !ok || mode == "" {
				return
			}

			if !slices.Contains(ipModes, mode) {
				p.problem(vn, "ipMode %q is neither VIP nor Proxy", mode)

				return
			}

			pool.IpMode = mode
		}
	})

	n = p.resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}

	if pool.GetName() == "" {
		p.problem(n, "the pool has no name")
	}

	if len(pool.GetAddresses()) == 0 {
		p.problem(n, "the pool has no addresses: give it CIDRs (192.0.2.0/28) or ranges (192.0.2.10-192.0.2.20)")
	}

	for i := range ranges {
		ranges[i].pool = pool.GetName()
	}

	return ranges
}

// labelSelector reads a Kubernetes label selector, checked as the apiserver checks one.
func (p *parser) labelSelector(n *yaml.Node, what string) *specs.LabelSelector {
	out := &specs.LabelSelector{}

	p.mapping(n, what, labelSelectorKeys, func(key string, _, v *yaml.Node) {
		switch key {
		case "matchLabels":
			out.MatchLabels = p.stringMap(v, what+".matchLabels", func(key, value string, k, vn *yaml.Node) {
				if errs := content.IsLabelKey(key); len(errs) > 0 {
					p.problem(k, "%s.matchLabels: %q is not a label key: %s", what, key, strings.Join(errs, "; "))
				}

				if errs := content.IsLabelValue(value); len(errs) > 0 {
					p.problem(vn, "%s.matchLabels[%q]: %q is not a label value: %s", what, key, value, strings.Join(errs, "; "))
				}
			})
		case "matchExpressions":
			p.sequence(v, what+".matchExpressions", func(i int, item *yaml.Node) {
				at := fmt.Sprintf("%s.matchExpressions[%d]", what, i)
				req := &specs.LabelSelectorRequirement{}

				p.mapping(item, at, labelRequirementKeys, func(key string, _, v *yaml.Node) {
					switch key {
					case "key":
						req.Key, _, _ = p.scalar(v, at+".key")
					case "operator":
						req.Operator, _, _ = p.scalar(v, at+".operator")
					case "values":
						req.Values = p.stringList(v, at+".values")
					}
				})

				probe := config.LabelSelector(&specs.LabelSelector{MatchExpressions: []*specs.LabelSelectorRequirement{req}})
				if _, err := metav1.LabelSelectorAsSelector(probe); err != nil {
					p.problem(p.resolve(item), "%s: %v", at, err)
				}

				out.MatchExpressions = append(out.MatchExpressions, req)
			})
		}
	})

	return out
}

// checkOverlaps reports addresses that are in two pools, or twice in one: each IP has one pool.
func (p *parser) checkOverlaps(ranges []lbRange) {
	for i, a := range ranges {
		for _, b := range ranges[:i] {
			if a.first.BitLen() != b.first.BitLen() || a.last.Less(b.first) || b.last.Less(a.first) {
				continue
			}

			p.problems = append(p.problems, Problem{
				Line:    a.line,
				Message: fmt.Sprintf("loadBalancer.pools: the addresses of pool %q overlap those of pool %q on line %d", a.pool, b.pool, b.line),
			})
		}
	}
}
