package k8ssink

import (
	certificatesv1 "k8s.io/api/certificates/v1"
)

// TrimCSR drops from a certificate request what talos-ccm never reads before the informer caches it: its
// managedFields (a few hundred bytes per request, thousands of requests on a large cluster). The approval
// update leaves them out, so the server keeps its own.
//
// It is an informer transform (cache.TransformFunc): it changes the object it is given, which the
// informer has just decoded and nobody else holds.
func TrimCSR(obj any) (any, error) {
	if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
		csr.ManagedFields = nil
	}

	return obj, nil
}
