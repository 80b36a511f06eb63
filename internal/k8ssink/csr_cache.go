package k8ssink

import (
	certificatesv1 "k8s.io/api/certificates/v1"
)

// TrimCSR drops from a certificate request what talos-ccm never reads before the informer caches it: its
// managedFields (a few hundred bytes per request, thousands of requests on a large cluster), and, once the
// request is approved, denied or failed, its PKCS#10 request and issued certificate (a kilobyte or two
// each; the signer's cleaner deletes approved requests only an hour later). The approval update leaves
// managedFields out, so the server keeps its own; a request that is no longer pending is neither mirrored
// nor written again (see applicable), so nothing reads what it lost.
// The strings every kubelet's request repeats are shared with the other requests (shareCSRStrings).
//
// It is an informer transform (cache.TransformFunc): it changes the object it is given, which the
// informer has just decoded and nobody else holds.
func TrimCSR(obj any) (any, error) {
	csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return obj, nil
	}

	csr.ManagedFields = nil
	shareCSRStrings(csr)

	if !CSRPending(csr) {
		csr.Spec.Request = nil
		csr.Status.Certificate = nil
	}

	return csr, nil
}
