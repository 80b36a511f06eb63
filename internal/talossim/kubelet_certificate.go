package talossim

import (
	"net"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// requestVerdict is what a kubelet knows of its newest serving certificate request.
type requestVerdict int

const (
	requestPending requestVerdict = iota
	requestApproved
	requestDenied
)

// servingRequest is a kubelet's newest serving certificate request, as its certificate manager knows it:
// its name, the names and IPs it asked for, and its verdict so far.
type servingRequest struct {
	name     string
	dnsNames []string
	ips      []net.IP
	verdict  requestVerdict
}

// requestDue reports whether a kubelet whose Node's addresses give the names and IPs files a serving
// certificate request now, after last (nil: none yet), as a kubelet's certificate manager does:
//
//   - none without any name or IP (a kubelet waits for its Node's addresses: with a node IP given, those
//     it posts itself when it registers);
//   - none while its request is pending (it waits for the certificate);
//   - after an approval, another once its Node has a name or IP the certificate lacks (the manager checks
//     that its certificate still satisfies the template made of the Node's addresses);
//   - after a denial, another only for other names or IPs (a kubelet retries after a backoff, with the
//     same request when nothing changed, which would be denied again: the simulation files none).
func requestDue(last *servingRequest, dnsNames []string, ips []net.IP) bool {
	switch {
	case len(dnsNames) == 0 && len(ips) == 0:
		return false
	case last == nil:
		return true
	case last.verdict == requestPending:
		return false
	case last.verdict == requestApproved:
		return !containsAll(last.dnsNames, dnsNames, sameName) || !containsAll(last.ips, ips, net.IP.Equal)
	default:
		return !sameSet(last.dnsNames, dnsNames, sameName) || !sameSet(last.ips, ips, net.IP.Equal)
	}
}

// requestVerdictOf reads the verdict of a request from its conditions: Denied and Failed are final
// refusals, Approved an approval (a signer issues the certificate; the simulation takes the approval as
// the certificate).
func requestVerdictOf(csr *certificatesv1.CertificateSigningRequest) requestVerdict {
	verdict := requestPending

	for _, cond := range csr.Status.Conditions {
		switch cond.Type {
		case certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return requestDenied
		case certificatesv1.CertificateApproved:
			verdict = requestApproved
		}
	}

	return verdict
}

// requester returns the node whose kubelet filed a kubelet-serving request, or "".
func requester(csr *certificatesv1.CertificateSigningRequest) string {
	if csr.Spec.SignerName != KubeletServingSigner {
		return ""
	}

	name, ok := strings.CutPrefix(csr.Spec.Username, NodeUserPrefix)
	if !ok {
		return ""
	}

	return name
}

func sameName(a, b string) bool { return a == b }

func containsAll[E any](have, want []E, equal func(E, E) bool) bool {
	for _, w := range want {
		if !slices.ContainsFunc(have, func(h E) bool { return equal(h, w) }) {
			return false
		}
	}

	return true
}

func sameSet[E any](a, b []E, equal func(E, E) bool) bool {
	return containsAll(a, b, equal) && containsAll(b, a, equal)
}
