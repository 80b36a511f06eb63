package csr

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
)

// ServiceRangesPatience is how long a request waits for the Service ranges from Talos before its decision
// says that they may never come, and how to decide without them.
const ServiceRangesPatience = time.Minute

// ReservedFacts are the facts rule 9 reads beyond the configuration.
type ReservedFacts struct {
	// TalosServiceCIDRs are the Service ranges Talos gives kube-controller-manager (the ControllerManagerConfig
	// of every control-plane machine read, merged); they count when the configuration has no serviceCIDRs.
	TalosServiceCIDRs []string
	// APIServerIPs are the endpoints of the default/kubernetes Service: the apiserver's own IPs.
	APIServerIPs []string
	// ServiceCIDRsFromTalos says that, with no serviceCIDRs in the configuration, the Service ranges come
	// from Talos: rule 9 waits until TalosServiceCIDRs is read.
	ServiceCIDRsFromTalos bool
	// APIServerSource says that a source mirrors the apiserver's endpoints: rule 9 waits until APIServerRead.
	APIServerSource bool
	// APIServerRead says that the source has read the endpoints (there may be none).
	APIServerRead bool
}

// broadcast is the IPv4 limited broadcast address.
var broadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// ReservedIP says why an IP can never be a node's own serving address ("" when it can): loopback,
// link-local, unspecified, multicast or the IPv4 broadcast.
func ReservedIP(ip netip.Addr) string {
	ip = ip.Unmap()

	switch {
	case !ip.IsValid():
		return "invalid"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsMulticast():
		return "multicast"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip == broadcast:
		return "broadcast"
	}

	return ""
}

// LocalName says whether a DNS name is the local host's: localhost, names under .localhost (RFC 6761) and
// localhost.localdomain, in any case.
func LocalName(name string) bool {
	n := normalizeName(name)

	return n == "localhost" || strings.HasSuffix(n, ".localhost") || n == "localhost.localdomain"
}

// reserved is rule 9: no name of the local host or of the cluster's own services, no IP that can never be a
// node's (loopback, link-local, unspecified, multicast, broadcast), no IP in the Service ranges, and no IP of
// the apiserver unless it is the requesting node's own.
func (d *decider) reserved() outcome {
	if d.req == nil {
		return skip("the request does not parse")
	}

	domain := normalizeName(d.in.Config.GetClusterDomain())
	if domain == "" {
		domain = config.DefaultClusterDomain
	}

	var found, waiting []string

	for _, name := range d.dnsNames {
		switch {
		case LocalName(name):
			found = append(found, fmt.Sprintf("DNS name %q of the local host", name))
		case ReservedName(name, domain):
			found = append(found, fmt.Sprintf("DNS name %q", name))
		}
	}

	ranges, rangesFrom, rangesProblem := d.serviceRanges()
	apiServer, apiServerProblem := d.apiServerIPs()

	for _, ip := range d.ips {
		if why := ReservedIP(ip); why != "" {
			found = append(found, fmt.Sprintf("IP %s (%s)", ip, why))

			continue
		}

		if i := slices.IndexFunc(ranges, func(r netip.Prefix) bool { return r.Contains(ip) }); i >= 0 {
			found = append(found, fmt.Sprintf("IP %s in the service range %s", ip, ranges[i]))

			continue
		}

		if slices.Contains(apiServer, ip) {
			switch fail, wait := d.apiServerIP(ip); {
			case fail != "":
				found = append(found, fail)
			case wait != "":
				waiting = append(waiting, wait)
			}
		}
	}

	// A definite violation denies even while other facts are missing; a missing fact only waits.
	for _, problem := range []string{rangesProblem, apiServerProblem} {
		if problem != "" {
			waiting = append(waiting, problem)
		}
	}

	switch {
	case len(found) > 0:
		return fail("reserved: %s", strings.Join(found, ", "))
	case len(waiting) > 0:
		return wait("%s", strings.Join(waiting, "; "))
	}

	return pass("no reserved name or IP (cluster domain %s; %s; %d apiserver IPs)", domain, rangesFrom, len(apiServer))
}

// serviceRanges returns the Service ranges and where they come from, or why rule 9 waits for them: from the
// configuration when it has any, otherwise from Talos's ControllerManagerConfig.
func (d *decider) serviceRanges() ([]netip.Prefix, string, string) {
	configured := d.in.Config.GetServiceCidrs()
	from := "service ranges from the configuration"

	if len(configured) == 0 {
		facts := d.in.Reserved

		switch {
		case !facts.ServiceCIDRsFromTalos:
			return nil, "no service range known (no serviceCIDRs in the configuration, no Talos API)", ""
		case len(facts.TalosServiceCIDRs) == 0:
			return nil, "", d.serviceRangesMissing()
		}

		configured, from = facts.TalosServiceCIDRs, "service ranges from Talos's ControllerManagerConfig"
	}

	ranges := make([]netip.Prefix, 0, len(configured))

	for _, cidr := range configured {
		prefix, err := netip.ParsePrefix(strings.TrimSpace(cidr))
		if err != nil {
			return nil, "", fmt.Sprintf("the service CIDR %q is invalid", cidr)
		}

		ranges = append(ranges, prefix.Masked())
	}

	return ranges, from + " " + joinPrefixes(ranges), ""
}

// serviceRangesMissing says why rule 9 waits for the Service ranges from Talos. A cluster where no
// control-plane machine can be read would wait for good: once the request has waited for
// ServiceRangesPatience, the decision says so, and how to decide without them.
func (d *decider) serviceRangesMissing() string {
	const missing = "the Service ranges are not known yet: no control-plane machine's ControllerManagerConfig was read through the Talos API"

	created := d.csr.GetCreated()
	if created == nil || !created.IsValid() {
		return missing
	}

	until := created.AsTime().Add(ServiceRangesPatience)
	if until.After(d.in.Now) {
		if d.settleUntil.IsZero() || until.Before(d.settleUntil) {
			d.settleUntil = until
		}

		return missing
	}

	return fmt.Sprintf("the Service ranges are still not known after %s: no control-plane machine's ControllerManagerConfig "+
		"could be read through the Talos API (no control-plane Node, or none reachable); nothing is approved without them: "+
		"set serviceCIDRs in the configuration (or --service-cluster-ip-range)", ServiceRangesPatience)
}

// apiServerIPs returns the apiserver's own IPs, or why rule 9 waits for them.
func (d *decider) apiServerIPs() ([]netip.Addr, string) {
	facts := d.in.Reserved

	if facts.APIServerSource && !facts.APIServerRead {
		return nil, "the endpoints of the default/kubernetes Service (the apiserver's own IPs) are not read yet"
	}

	ips := make([]netip.Addr, 0, len(facts.APIServerIPs))

	for _, text := range facts.APIServerIPs {
		if ip, err := netip.ParseAddr(strings.TrimSpace(text)); err == nil {
			ips = append(ips, ip.Unmap())
		}
	}

	return ips, ""
}

// apiServerIP decides about an IP of the apiserver in the request: it fails (first result) or waits
// (second) unless the IP is the requesting node's own. On Talos a control-plane node's own IP is an
// apiserver endpoint, and its kubelet asks a serving certificate for it: with Talos facts that is proven
// by the Node's addresses talos-ccm verified from its machine; without, by the control-plane label, which
// a kubelet cannot set on its own Node.
func (d *decider) apiServerIP(ip netip.Addr) (string, string) {
	const of = "an endpoint of the default/kubernetes Service (the apiserver's)"

	switch {
	case !d.isNode:
		return fmt.Sprintf("IP %s, %s", ip, of), ""
	case d.in.TalosFacts && !d.in.Verified:
		return "", fmt.Sprintf("IP %s is %s, allowed only as one of Node %q's addresses verified through Talos, not verified yet", ip, of, d.nodeName)
	case d.in.TalosFacts:
		for _, a := range d.in.VerifiedAddresses {
			if own, err := netip.ParseAddr(strings.TrimSpace(a.GetAddress())); err == nil && own.Unmap() == ip {
				return "", ""
			}
		}

		return fmt.Sprintf("IP %s, %s and not one of Node %q's addresses verified through Talos", ip, of, d.nodeName), ""
	case d.in.Node == nil:
		return "", fmt.Sprintf("IP %s is %s, allowed only to a control-plane Node; Node %q does not exist yet", ip, of, d.nodeName)
	}

	// NodeRestriction keeps a kubelet from setting the control-plane label on its own Node, so without Talos
	// facts it is the evidence that a node may name an apiserver IP (its own).
	if _, ok := d.in.Node.GetLabels()[kubekeys.LabelControlPlane]; ok {
		return "", ""
	}

	return fmt.Sprintf("IP %s, %s, and Node %q is not a control-plane Node (no %s label)", ip, of, d.nodeName, kubekeys.LabelControlPlane), ""
}

func joinPrefixes(prefixes []netip.Prefix) string {
	texts := make([]string, 0, len(prefixes))
	for _, p := range prefixes {
		texts = append(texts, p.String())
	}

	return strings.Join(texts, ", ")
}
