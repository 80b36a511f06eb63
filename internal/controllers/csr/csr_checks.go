package csr

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubenames"
	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	csrres "github.com/talos-ccm/talos-ccm/internal/resources/csr"
)

// Limits and names the rules use.
const (
	// NodeUserPrefix prefixes the user name of a node's credentials.
	NodeUserPrefix = "system:node:"
	// NodesGroup is the group of every node's credentials.
	NodesGroup = "system:nodes"
	// MaxRequestBytes is the largest spec.request accepted (rule 2).
	MaxRequestBytes = csrres.MaxRequestBytes
	// MaxSANs bounds the subject alternative names of a request (rule 2).
	MaxSANs = 100
	// MaxRSABits bounds RSA keys: verifying a signature with a larger key costs more than a request should.
	MaxRSABits = 8192
	// AddressSettle is how long a request whose names or addresses do not match its Node's waits before it
	// is denied: the Node's new addresses and the request that names them come through separate watches.
	AddressSettle = 5 * time.Second
)

// Key usages a kubelet serving certificate may have (rule 4).
const (
	usageDigitalSignature = "digital signature"
	usageKeyEncipherment  = "key encipherment"
	usageServerAuth       = "server auth"
)

// Check is one approval check. The README, every decision's reason and the CSRRuleResults a CSRDecision
// records call them "rule N (name)": those words are part of the output and stay; in the code they are
// checks, and "rules" are the transformation rules only.
type Check struct {
	// run evaluates the check on one request.
	run func(*decider) outcome
	// Name is the check's short name, as the decisions and the failure metric name it.
	Name string
	// Number is the check's number: the checks run in this order.
	Number int32
	// Denies says that a failure of the check denies the request. A failure of any other check only
	// waits: the Node may not be initialized yet, or the Talos facts may lag behind.
	Denies bool
}

// checks is the one definition of the approval checks, in the order they run: the order, the set of checks
// that deny, the names in the decisions and the failure metric's labels are all read from it. Every check
// must pass (or be skipped) for a request to be approved. A new check is one entry here with its method on
// decider; TestChecksTable keeps the table and the README's table of rules in step.
var checks = []Check{
	{Number: 1, Name: "requester", Denies: true, run: (*decider).requester},
	{Number: 2, Name: "request", Denies: true, run: (*decider).request},
	{Number: 3, Name: "subject", Denies: true, run: (*decider).subject},
	{Number: 4, Name: "usages", Denies: true, run: (*decider).usages},
	{Number: 5, Name: "expiration", Denies: true, run: (*decider).expiration},
	{Number: 6, Name: "node", Denies: false, run: (*decider).node},
	{Number: 7, Name: "node-addresses", Denies: true, run: (*decider).nodeAddresses},
	{Number: 8, Name: "machine-addresses", Denies: false, run: (*decider).machineAddresses},
	{Number: 9, Name: "reserved", Denies: true, run: (*decider).reserved},
	{Number: 10, Name: "operator", Denies: true, run: (*decider).operator},
}

// Checks returns the approval checks, in the order they run.
func Checks() []Check {
	return slices.Clone(checks)
}

// denies says whether a failure of the check numbered number denies the request.
func denies(number int32) bool {
	i := slices.IndexFunc(checks, func(c Check) bool { return c.Number == number })

	return i >= 0 && checks[i].Denies
}

// DecisionInput is everything the decision about one request depends on.
type DecisionInput struct {
	// Now is the time of the decision.
	Now time.Time
	// CSR is the request.
	CSR *specs.KubeCSRSpec
	// Node is the requesting node's Node, nil when there is none.
	Node *specs.KubeNodeSpec
	// Machine holds the Talos facts of the requesting node's machine, nil when there are none.
	Machine *specs.MachineAddressesSpec
	// Config is the configuration in force; nil means the defaults.
	Config *specs.ConfigSpec
	// SupersededBy names a newer pending request of the same requester, when there is one: the request is
	// then denied without being read.
	SupersededBy string
	// TalosFacts says whether a Talos source runs (or a host writes the machines' facts): then rules 6 to 8
	// decide from what talos-ccm verified of the requesting node's machine; without one, from the Node's
	// status, which is the kubelet's own claim.
	TalosFacts bool
	// Verified says that talos-ccm bound the Node to its machine (the machine names itself this Node, and
	// no other Node holds it, its providerID or its addresses) and computed its complete NodeTransform.
	Verified bool
	// VerifiedAddresses are the Node's addresses as talos-ccm computed them from the verified machine's
	// facts (the NodeTransform's), not as the kubelet wrote them; nil without Talos facts.
	VerifiedAddresses []*specs.NodeAddress
	// Unverified says why the Node is not bound to its machine (the NodeTransform's conflict or pending),
	// when Verified is false.
	Unverified string
	// Throttled is how long until the requester's budget allows this request to be decided in full (it
	// filed more requests than Config's requestsPerMinute), zero when it does: the request then waits,
	// unread.
	Throttled time.Duration
	// Reserved holds the facts rule 9 reads beyond the configuration: the Service ranges from Talos and the
	// apiserver's own IPs.
	Reserved ReservedFacts
	// Parsed is the request as ParseRequest read it, for a caller that keeps it between decisions of the
	// same request. It is used only if it was read from exactly CSR's request bytes: nil, or another
	// request's, and DecideCSR reads the request itself.
	Parsed *ParsedRequest
}

// DecideCSR applies the approval rules to a request. It also returns, for a request that waits only
// because its names do not match its Node yet, how long until it should be decided again (zero
// otherwise). It never panics, whatever the input.
func DecideCSR(in DecisionInput) (*specs.CSRDecisionSpec, time.Duration) {
	csr := in.CSR
	if csr == nil {
		csr = &specs.KubeCSRSpec{}
	}

	nodeName, isNode := NodeName(csr.GetUsername())

	out := &specs.CSRDecisionSpec{
		Requester: clean(csr.GetUsername()),
		CsrUid:    clean(csr.GetUid()),
		DecidedAt: timestamppb.New(in.Now),
	}

	if isNode {
		out.Node = clean(nodeName)
	}

	// A superseded request is denied unread: the kubelet waits for its newest request only, and a denied
	// request leaves the caches with its bytes, which a pending one would hold for a day.
	if in.SupersededBy != "" {
		out.Verdict = csrres.VerdictDeny
		out.SupersededBy = clean(in.SupersededBy)
		out.Reason = fmt.Sprintf("superseded by the newer pending request %q of the same requester: only the newest one is decided", out.SupersededBy)

		return out, 0
	}

	if in.Throttled > 0 {
		out.Verdict = csrres.VerdictWait
		out.Reason = fmt.Sprintf("throttled: the requester files more than %d requests a minute (--csr-requests-per-minute); decided when its budget allows", RequestsPerMinute(in.Config))

		return out, in.Throttled
	}

	parsed := in.Parsed
	if !parsed.parsedFrom(csr.GetRequest()) {
		parsed = ParseRequest(csr.GetRequest())
	}

	d := decider{ParsedRequest: parsed, in: in, csr: csr, nodeName: nodeName, isNode: isNode}

	if d.req != nil {
		// A copy: the parse is kept for the request's next decisions.
		out.DnsNames = slices.Clone(d.dnsNames)
		for _, ip := range d.ips {
			out.IpAddresses = append(out.IpAddresses, ip.String())
		}
	}

	// The results of one decision are made together: one allocation, where each was one.
	results := make([]specs.CSRRuleResult, len(checks))
	out.Rules = make([]*specs.CSRRuleResult, len(checks))

	for i, check := range checks {
		o := check.run(&d)

		r := &results[i]
		r.Number, r.Name, r.Result, r.Reason = check.Number, check.Name, o.result, o.reason
		out.Rules[i] = r
	}

	out.Verdict, out.Reason = verdict(out.Rules)

	var recheck time.Duration
	if out.Verdict == csrres.VerdictWait && d.settleUntil.After(in.Now) {
		recheck = d.settleUntil.Sub(in.Now)
	}

	return out, recheck
}

// RequestsPerMinute is the rate above which a requester's requests are throttled, from the configuration.
func RequestsPerMinute(cfg *specs.ConfigSpec) int {
	if n := cfg.GetCsrApproval().GetRequestsPerMinute(); n > 0 {
		return int(n)
	}

	return config.DefaultCSRRequestsPerMinute
}

// NodeName returns the node name of a node's user name (system:node:NAME).
func NodeName(username string) (string, bool) {
	name, ok := strings.CutPrefix(username, NodeUserPrefix)
	if !ok || name == "" {
		return "", false
	}

	return name, true
}

// verdict combines the rule outcomes: deny on a failure of a denying rule, wait on any other failure or
// wait, approve otherwise.
func verdict(rules []*specs.CSRRuleResult) (string, string) {
	var denied, waiting, skipped []string

	// Only the rules that did not pass are named in the reason.
	for _, r := range rules {
		var list *[]string

		switch {
		case r.GetResult() == csrres.ResultFail && denies(r.GetNumber()):
			list = &denied
		case r.GetResult() == csrres.ResultFail || r.GetResult() == csrres.ResultWait:
			list = &waiting
		case r.GetResult() == csrres.ResultSkip:
			list = &skipped
		default:
			continue
		}

		*list = append(*list, "rule "+strconv.Itoa(int(r.GetNumber()))+" ("+r.GetName()+"): "+r.GetReason())
	}

	switch {
	case len(denied) > 0:
		return csrres.VerdictDeny, strings.Join(denied, "; ")
	case len(waiting) > 0:
		return csrres.VerdictWait, strings.Join(waiting, "; ")
	case len(skipped) > 0:
		return csrres.VerdictApprove, "every rule passes; " + strings.Join(skipped, "; ")
	default:
		return csrres.VerdictApprove, "every rule passes"
	}
}

// decider evaluates the rules of one request.
type decider struct {
	*ParsedRequest

	in       DecisionInput
	csr      *specs.KubeCSRSpec
	nodeName string
	// settleUntil is when a waiting decision is to be made again: set when the names do not match the Node
	// yet and the request is young (rule 7), or while the Service ranges are awaited (rule 9).
	settleUntil time.Time
	isNode      bool
}

// outcome is what one check found of one request: its result (pass, fail, wait or skip) and why.
type outcome struct {
	result string
	reason string
}

func pass(format string, args ...any) outcome { return result(csrres.ResultPass, format, args...) }

func fail(format string, args ...any) outcome { return result(csrres.ResultFail, format, args...) }

func wait(format string, args ...any) outcome { return result(csrres.ResultWait, format, args...) }

func skip(format string, args ...any) outcome { return result(csrres.ResultSkip, format, args...) }

// result makes an outcome; a reason without arguments is the format itself, shared by every decision that
// gives it, not a copy of it per decision.
func result(res, format string, args ...any) outcome {
	reason := format
	if len(args) > 0 {
		reason = fmt.Sprintf(format, args...)
	}

	return outcome{result: res, reason: clean(reason)}
}

// clean keeps text from a request printable in a decision (protobuf strings must be valid UTF-8) and
// bounded in length.
func clean(s string) string {
	const limit = 4096

	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > limit {
		s = strings.ToValidUTF8(s[:limit], "") + "…"
	}

	return s
}

// requester is rule 1: the requester is a node.
func (d *decider) requester() outcome {
	username := d.csr.GetUsername()

	if !d.isNode {
		return fail("the requester %q is not a node (%sNAME)", username, NodeUserPrefix)
	}

	if !kubenames.IsDNS1123Subdomain(d.nodeName) {
		return fail("the node name %q is not a DNS-1123 subdomain", d.nodeName)
	}

	if !slices.Contains(d.csr.GetGroups(), NodesGroup) {
		return fail("the requester %q is not in the group %s", username, NodesGroup)
	}

	return pass("%s in the group %s", username, NodesGroup)
}

// request is rule 2: the request parses, its size and SAN count are bounded, its key is strong and not too
// large, and its signature verifies. ParseRequest checks them in this order and verifies the signature last.
func (d *decider) request() outcome {
	switch {
	case d.req == nil:
		return fail("%s", d.parseErr)
	case d.refused != "":
		return fail("%s (the signature is not verified)", d.refused)
	case d.signatureErr != nil:
		return fail("the signature does not verify: %v", d.signatureErr)
	}

	return pass("%d bytes, %s key, signature verified", len(d.csr.GetRequest()), d.key)
}

// keyDescription describes a public key and says whether it is accepted.
func keyDescription(key any) (string, bool) {
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k == nil || k.N == nil {
			return "an invalid RSA key", false
		}

		bits := k.N.BitLen()

		return fmt.Sprintf("RSA %d bits", bits), bits >= 2048 && bits <= MaxRSABits
	case *ecdsa.PublicKey:
		if k == nil || k.Curve == nil {
			return "an invalid ECDSA key", false
		}

		name := k.Curve.Params().Name

		return "ECDSA " + name, k.Curve == elliptic.P256() || k.Curve == elliptic.P384()
	case ed25519.PublicKey:
		return "Ed25519", len(k) == ed25519.PublicKeySize
	default:
		return fmt.Sprintf("of type %T", key), false
	}
}

// subject is rule 3: O is exactly system:nodes, CN is the requester, and the SANs are DNS names and IP
// addresses only, at least one.
func (d *decider) subject() outcome {
	if d.req == nil {
		return skip("the request does not parse")
	}

	var problems []string

	subject := d.req
	if !slices.Equal(subject.organization, []string{NodesGroup}) {
		problems = append(problems, fmt.Sprintf("O is %q, not exactly [%q]", subject.organization, NodesGroup))
	}

	switch {
	case subject.commonNames > 1:
		problems = append(problems, fmt.Sprintf("the subject has %d CNs", subject.commonNames))
	case subject.commonName != d.csr.GetUsername():
		problems = append(problems, fmt.Sprintf("CN %q is not the requester %q", subject.commonName, d.csr.GetUsername()))
	}

	if subject.emails > 0 || subject.uris > 0 || len(d.otherSANs) > 0 {
		kinds := slices.Clone(d.otherSANs)

		if subject.emails > 0 && !slices.Contains(kinds, "email") {
			kinds = append(kinds, "email")
		}

		if subject.uris > 0 && !slices.Contains(kinds, "URI") {
			kinds = append(kinds, "URI")
		}

		problems = append(problems, "subject alternative names of a forbidden type: "+strings.Join(kinds, ", "))
	}

	if len(d.dnsNames)+len(d.ips) == 0 {
		problems = append(problems, "no DNS name or IP address")
	}

	if len(problems) > 0 {
		return fail("%s", strings.Join(problems, "; "))
	}

	return pass("O=%s, CN=%s, %d DNS names, %d IP addresses", NodesGroup, subject.commonName, len(d.dnsNames), len(d.ips))
}

// usages is rule 4: digital signature and server auth, optionally key encipherment, nothing else.
func (d *decider) usages() outcome {
	usages := d.csr.GetUsages()

	var extra []string

	for _, u := range usages {
		if u != usageDigitalSignature && u != usageKeyEncipherment && u != usageServerAuth && !slices.Contains(extra, u) {
			extra = append(extra, u)
		}
	}

	var missing []string

	for _, u := range []string{usageDigitalSignature, usageServerAuth} {
		if !slices.Contains(usages, u) {
			missing = append(missing, u)
		}
	}

	switch {
	case len(extra) > 0 && len(missing) > 0:
		return fail("usages %q not allowed and %q missing", extra, missing)
	case len(extra) > 0:
		return fail("usages %q not allowed (only %s, %s and %s)", extra, usageDigitalSignature, usageServerAuth, usageKeyEncipherment)
	case len(missing) > 0:
		return fail("usages %q missing", missing)
	}

	return pass("%s", strings.Join(usages, ", "))
}

// expiration is rule 5: the requested lifetime, when set, is at most the configured maximum.
func (d *decider) expiration() outcome {
	maxSeconds := d.in.Config.GetCsrApproval().GetMaxExpirationSeconds()
	if maxSeconds <= 0 {
		maxSeconds = int64(config.DefaultCSRMaxExpiration / time.Second)
	}

	requested := d.csr.GetExpirationSeconds()

	switch {
	case requested == 0:
		return pass("no expirationSeconds: the signer's default lifetime")
	case requested < 0 || requested > maxSeconds:
		return fail("expirationSeconds %d is more than the maximum %d", requested, maxSeconds)
	}

	return pass("expirationSeconds %d, at most %d", requested, maxSeconds)
}

// kubeletClaim marks the reasons of decisions made without Talos facts.
const kubeletClaim = "evidence: the Node's status, the kubelet's own claim (no Talos API)"

// node is rule 6: the Node exists and talos-ccm initialized it from its machine's verified facts (without
// Talos facts: the Node exists and has no uninitialized taint). It waits, never fails.
func (d *decider) node() outcome {
	switch {
	case !d.isNode:
		return skip("the requester is not a node")
	case d.in.Node == nil:
		return wait("Node %q does not exist yet", d.nodeName)
	case d.in.Node.GetUninitialized():
		return wait("Node %q is not initialized yet", d.nodeName)
	case !d.in.TalosFacts:
		return pass("Node %q exists and is initialized (%s)", d.nodeName, kubeletClaim)
	case !d.in.Verified && d.in.Unverified != "":
		return wait("Node %q is not bound to its machine: %s", d.nodeName, d.in.Unverified)
	case !d.in.Verified:
		return wait("Node %q is not initialized by talos-ccm from its machine's verified facts yet", d.nodeName)
	}

	return pass("Node %q is initialized by talos-ccm from its machine's verified facts", d.nodeName)
}

// nodeAddresses is rule 7: every DNS name is one of the Node's Hostname, InternalDNS or ExternalDNS
// addresses, every IP one of its InternalIP or ExternalIP addresses; no wildcards.
func (d *decider) nodeAddresses() outcome {
	if d.req == nil {
		return skip("the request does not parse")
	}

	var wildcards []string

	for _, name := range d.dnsNames {
		if strings.Contains(name, "*") {
			wildcards = append(wildcards, name)
		}
	}

	if len(wildcards) > 0 {
		return fail("wildcard DNS names %q", wildcards)
	}

	if !d.isNode {
		return skip("the requester is not a node")
	}

	if d.in.Node == nil || d.in.Node.GetUninitialized() {
		return wait("the Node's addresses are not final until it is initialized")
	}

	// With Talos facts, the names and IPs are compared with the addresses talos-ccm computed from the
	// verified machine: what the kubelet wrote into the Node's status is its own claim.
	addresses, evidence := d.in.VerifiedAddresses, "the addresses talos-ccm verified of Node %q's machine"
	if !d.in.TalosFacts {
		addresses, evidence = d.in.Node.GetAddresses(), "the addresses of Node %q ("+kubeletClaim+")"
	} else if !d.in.Verified {
		return wait("Node %q is not bound to its machine: no verified addresses", d.nodeName)
	}

	evidence = fmt.Sprintf(evidence, d.nodeName)

	var (
		names []string
		ips   []netip.Addr
	)

	for _, a := range addresses {
		switch a.GetType() {
		case "Hostname", "InternalDNS", "ExternalDNS":
			names = append(names, a.GetAddress())
		case "InternalIP", "ExternalIP":
			if ip, err := netip.ParseAddr(strings.TrimSpace(a.GetAddress())); err == nil {
				ips = append(ips, ip.Unmap())
			}
		}
	}

	var foreign []string

	for _, name := range d.dnsNames {
		if !slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, name) }) {
			foreign = append(foreign, fmt.Sprintf("DNS name %q", name))
		}
	}

	for _, ip := range d.ips {
		if !slices.Contains(ips, ip) {
			foreign = append(foreign, "IP "+ip.String())
		}
	}

	if len(foreign) == 0 {
		return pass("every name and IP is among %s", evidence)
	}

	message := fmt.Sprintf("%s not among %s", strings.Join(foreign, ", "), evidence)

	if created := d.csr.GetCreated(); created != nil && created.IsValid() {
		if until := created.AsTime().Add(AddressSettle); until.After(d.in.Now) {
			d.settleUntil = until

			return wait("%s yet (denied unless they are by %s)", message, until.UTC().Format(time.RFC3339))
		}
	}

	return fail("%s", message)
}

// machineAddresses is rule 8: every IP is also one of the machine's own addresses as Talos reports them
// (nodeaddress.OwnAddresses).
// It never denies: Talos facts can lag behind.
func (d *decider) machineAddresses() outcome {
	switch {
	case !d.in.TalosFacts:
		return skip("no Talos API access: the out-of-band address check is off")
	case d.req == nil:
		return skip("the request does not parse")
	case len(d.ips) == 0:
		return pass("no IP addresses to check")
	case !d.isNode:
		return skip("the requester is not a node")
	case d.in.Machine == nil:
		return wait("the Talos facts of machine %q are not read yet", d.nodeName)
	case d.in.Machine.GetNodename() != d.nodeName:
		return wait("the machine addresses filed under %q are not of a machine that names itself %q", d.nodeName, d.nodeName)
	}

	var own []netip.Addr

	// Only the machine's own addresses: never kube-ipvs0's Service IPs, a shared VIP or a pool's
	// LoadBalancer IP, which sit on its links but are not its own.
	for _, a := range nodeaddress.OwnAddresses(d.in.Machine, d.in.Config.GetLoadBalancer()).GetAddresses() {
		if prefix, err := netip.ParsePrefix(a.GetAddress()); err == nil {
			own = append(own, prefix.Addr().Unmap())
		} else if ip, err := netip.ParseAddr(a.GetAddress()); err == nil {
			own = append(own, ip.Unmap())
		}
	}

	var foreign []string

	for _, ip := range d.ips {
		if !slices.Contains(own, ip) {
			foreign = append(foreign, ip.String())
		}
	}

	if len(foreign) > 0 {
		return fail("IP %s not among the addresses Talos reports for machine %q", strings.Join(foreign, ", "), d.nodeName)
	}

	return pass("every IP is an address Talos reports for machine %q", d.nodeName)
}

// ReservedName says whether a DNS name belongs to the cluster's own services: kubernetes, kubernetes.*,
// *.svc, *.svc.*, the cluster domain and names under it, in any case.
func ReservedName(name, clusterDomain string) bool {
	n := normalizeName(name)
	domain := normalizeName(clusterDomain)

	switch {
	case n == "kubernetes", strings.HasPrefix(n, "kubernetes."):
		return true
	case strings.HasSuffix(n, ".svc"), strings.Contains(n, ".svc."):
		return true
	case domain != "" && (n == domain || strings.HasSuffix(n, "."+domain)):
		return true
	}

	return false
}

func normalizeName(name string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".")
}

// operator is rule 10: the operator's narrowing from the configuration, when there is one.
func (d *decider) operator() outcome {
	if d.req == nil {
		return skip("the request does not parse")
	}

	cfg := d.in.Config.GetCsrApproval()
	prefixesText := cfg.GetAllowedIpPrefixes()
	pattern := cfg.GetDnsNameRegex()

	if len(prefixesText) == 0 && pattern == "" {
		return pass("no narrowing configured")
	}

	var problems []string

	if len(prefixesText) > 0 {
		prefixes := make([]netip.Prefix, 0, len(prefixesText))

		for _, text := range prefixesText {
			prefix, err := netip.ParsePrefix(strings.TrimSpace(text))
			if err != nil {
				return wait("the allowed IP prefix %q in the configuration is invalid", text)
			}

			prefixes = append(prefixes, prefix.Masked())
		}

		for _, ip := range d.ips {
			if !slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(ip) }) {
				problems = append(problems, fmt.Sprintf("IP %s outside the allowed prefixes", ip))
			}
		}
	}

	if pattern != "" {
		re, err := regexp.Compile("^(?:" + pattern + ")$")
		if err != nil {
			return wait("the DNS name regex in the configuration is invalid: %v", err)
		}

		for _, name := range d.dnsNames {
			if !re.MatchString(name) {
				problems = append(problems, fmt.Sprintf("DNS name %q does not match %q", name, pattern))
			}
		}
	}

	if len(problems) > 0 {
		return fail("%s", strings.Join(problems, ", "))
	}

	return pass("within the configured prefixes and DNS name pattern")
}

// newer orders two requests of one requester: the later created, and among those created in the same
// second (the API's precision), the greater name.
func newer(a string, aAt time.Time, b string, bAt time.Time) bool {
	if !aAt.Equal(bAt) {
		return aAt.After(bAt)
	}

	return a > b
}
