package csr

import (
	"bytes"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
)

// ParsedRequest is what the checks read from a request's bytes: its PEM block parsed, its subject
// alternative names, its key, and whether its signature verifies. Reading it costs more than the rest of a
// decision together (the signature above all), and a request is decided again whenever its node's facts
// change while the node joins, so the CSRDecision controller reads each request once (see parsedRequests).
// It keeps what the checks read, not the parsed request (about 2 KiB more per request, thousands of which
// wait while their Nodes join).
type ParsedRequest struct {
	// raw are the bytes it was read from.
	raw []byte
	// req is what the checks read of the parsed request, nil when it does not parse (parseErr).
	req *requestSubject
	// parseErr says why the request cannot be used, when req is nil.
	parseErr string
	// refused says why rule 2 denies the request without verifying its signature (its key or the number
	// of its names), empty when the signature was verified.
	refused string
	// key describes the request's public key.
	key string
	// signatureErr is why the request's signature does not verify, nil when it does (or it was not
	// verified: req is nil or refused is set).
	signatureErr error
	// otherSANs lists the subject alternative names that are neither DNS names nor IP addresses.
	otherSANs []string
	dnsNames  []string
	ips       []netip.Addr
}

// checkSignature verifies a request's signature. A variable so that a test can count the verifications.
var checkSignature = (*x509.CertificateRequest).CheckSignature

// ParseRequest decodes and parses a request (spec.request: PEM), reads its subject alternative names and
// verifies its signature. It never panics, whatever the bytes.
//
// Its cost is bounded whatever the request: the size is checked before anything is decoded, and the key
// (type, size, curve) and the number of names before the signature is verified. Verifying with an RSA key
// costs about the square of its size, and a request is free to carry a key of half a megabyte with a
// signature that is garbage: a request that rule 2 denies for its key is never verified.
func ParseRequest(raw []byte) *ParsedRequest {
	p := &ParsedRequest{raw: raw}

	if len(raw) > MaxRequestBytes {
		// The mirror keeps only the first MaxRequestBytes+1 bytes of a larger request.
		p.parseErr = fmt.Sprintf("the request is larger than %d bytes", MaxRequestBytes)

		return p
	}

	begin := bytes.Index(raw, []byte("-----BEGIN"))
	if begin < 0 {
		p.parseErr = "the request is not PEM-encoded"

		return p
	}

	if len(bytes.TrimSpace(raw[:begin])) != 0 {
		p.parseErr = "the request has data before its PEM block"

		return p
	}

	block, rest := pem.Decode(raw[begin:])

	switch {
	case block == nil:
		p.parseErr = "the request is not PEM-encoded"

		return p
	case block.Type != "CERTIFICATE REQUEST":
		p.parseErr = fmt.Sprintf("the PEM block is a %q, not a CERTIFICATE REQUEST", block.Type)

		return p
	case len(bytes.TrimSpace(rest)) != 0:
		p.parseErr = "the request has data after its PEM block"

		return p
	}

	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		p.parseErr = "the request does not parse: " + withoutAddresses(err.Error())

		return p
	}

	others, err := otherSANTypes(req)
	if err != nil {
		p.parseErr = err.Error()

		return p
	}

	p.req = subjectOf(req)
	p.otherSANs = others
	p.refused, p.key = refusedKeyOrNames(req, others)

	if p.refused == "" {
		p.signatureErr = checkSignature(req)
	}

	for _, name := range req.DNSNames {
		p.dnsNames = append(p.dnsNames, clean(name))
	}

	for _, ip := range req.IPAddresses {
		if addr, ok := netip.AddrFromSlice(ip); ok {
			p.ips = append(p.ips, addr.Unmap())
		}
	}

	return p
}

// requestSubject is what rule 3 reads of a parsed request: its subject's O and CN, how many CN attributes
// it has, and how many email and URI names Go's parser read of it.
type requestSubject struct {
	organization []string
	commonName   string
	commonNames  int
	emails       int
	uris         int
}

var oidCommonName = asn1.ObjectIdentifier{2, 5, 4, 3}

func subjectOf(req *x509.CertificateRequest) *requestSubject {
	s := &requestSubject{
		organization: req.Subject.Organization,
		commonName:   req.Subject.CommonName,
		emails:       len(req.EmailAddresses),
		uris:         len(req.URIs),
	}

	for _, attr := range req.Subject.Names {
		if attr.Type.Equal(oidCommonName) {
			s.commonNames++
		}
	}

	return s
}

// refusedKeyOrNames says why rule 2 denies a parsed request before its signature is verified ("" when it
// does not), and describes its key.
func refusedKeyOrNames(req *x509.CertificateRequest, otherSANs []string) (refused, key string) {
	key, ok := keyDescription(req.PublicKey)
	if !ok {
		return fmt.Sprintf("the key is %s: RSA of 2048 to %d bits, ECDSA P-256 or P-384, or Ed25519 only", key, MaxRSABits), key
	}

	sans := len(req.DNSNames) + len(req.IPAddresses) + len(req.EmailAddresses) + len(req.URIs) + len(otherSANs)
	if sans > MaxSANs {
		return fmt.Sprintf("%d subject alternative names, more than %d", sans, MaxSANs), key
	}

	return "", key
}

// generalNameTypes names the GeneralName choices of RFC 5280 by their context-specific tag.
var generalNameTypes = map[int]string{
	0: "otherName", 1: "email", 2: "DNS", 3: "x400Address", 4: "directoryName", 5: "ediPartyName", 6: "URI", 7: "IP", 8: "registeredID",
}

var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// otherSANTypes lists the subject alternative names that are not DNS names or IP addresses, including
// those Go's parser ignores (otherName, directoryName, registeredID and the like).
func otherSANTypes(req *x509.CertificateRequest) ([]string, error) {
	var (
		others []string
		seen   int
	)

	for _, ext := range req.Extensions {
		if !ext.Id.Equal(oidSubjectAltName) {
			continue
		}

		seen++
		if seen > 1 {
			return nil, fmt.Errorf("the request has more than one subject alternative name extension")
		}

		var seq asn1.RawValue

		rest, err := asn1.Unmarshal(ext.Value, &seq)
		if err != nil || len(rest) > 0 || seq.Class != asn1.ClassUniversal || seq.Tag != asn1.TagSequence || !seq.IsCompound {
			return nil, fmt.Errorf("the subject alternative name extension is malformed")
		}

		for inner := seq.Bytes; len(inner) > 0; {
			var name asn1.RawValue

			if inner, err = asn1.Unmarshal(inner, &name); err != nil {
				return nil, fmt.Errorf("the subject alternative name extension is malformed")
			}

			if name.Class != asn1.ClassContextSpecific {
				return nil, fmt.Errorf("the subject alternative name extension is malformed")
			}

			if name.Tag == 2 || name.Tag == 7 {
				continue
			}

			kind, ok := generalNameTypes[name.Tag]
			if !ok {
				kind = fmt.Sprintf("type %d", name.Tag)
			}

			if !slices.Contains(others, kind) {
				others = append(others, kind)
			}
		}
	}

	return others, nil
}

// memoryAddress matches a pointer printed into an error: Go's ASN.1 parser prints the field parameters of a
// structure error, a pointer among them.
var memoryAddress = regexp.MustCompile(`0x[0-9a-f]{8,}`)

// withoutAddresses removes the memory addresses from an error text: a decision records it, and the same
// request must always be decided the same way (a decision that differs is written again).
func withoutAddresses(text string) string {
	return memoryAddress.ReplaceAllString(text, "0x…")
}

// parsedFrom says whether p was read from exactly raw; false for a nil p.
func (p *ParsedRequest) parsedFrom(raw []byte) bool {
	return p != nil && bytes.Equal(p.raw, raw)
}
