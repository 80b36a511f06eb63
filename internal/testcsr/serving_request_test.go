package testcsr_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/testcsr"
)

// A request signed with a multi-prime key is one the apiserver and talos-ccm take as signed: its signature
// verifies with the key's public half alone.
func TestServingRequestMultiPrimeKey(t *testing.T) {
	t.Parallel()

	const count, bits = 8, 256

	key, err := testcsr.NewMultiPrimeKey(count, bits)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, key.Bits(), count*bits-count)

	raw, err := testcsr.ServingRequest("node-1", key)
	require.NoError(t, err)

	block, rest := pem.Decode(raw)
	require.NotNil(t, block)
	assert.Empty(t, rest)
	assert.Equal(t, "CERTIFICATE REQUEST", block.Type)

	req, err := x509.ParseCertificateRequest(block.Bytes)
	require.NoError(t, err)
	require.NoError(t, req.CheckSignature())

	assert.Equal(t, "system:node:node-1", req.Subject.CommonName)
	assert.Equal(t, []string{"system:nodes"}, req.Subject.Organization)
	assert.Equal(t, []string{"node-1"}, req.DNSNames)

	public, ok := req.PublicKey.(*rsa.PublicKey)
	require.True(t, ok)
	assert.Equal(t, key.Bits(), public.N.BitLen())
	assert.Equal(t, 1<<31-1, public.E)
}

// Only the digest the requests use is signed: any other would be encoded with the wrong prefix and make a
// signature that does not verify.
func TestMultiPrimeKeySignsSHA256Only(t *testing.T) {
	t.Parallel()

	key, err := testcsr.NewMultiPrimeKey(4, 256)
	require.NoError(t, err)

	_, err = key.Sign(rand.Reader, make([]byte, crypto.SHA1.Size()), crypto.SHA1)
	assert.Error(t, err)
}

// A padded request is still a well-signed serving request of its node, larger by the padding: the
// extension carries it, and nothing else changes.
func TestServingRequestWithPadding(t *testing.T) {
	t.Parallel()

	const pad = 10_000

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)

	plain, err := testcsr.ServingRequest("node-1", key)
	require.NoError(t, err)

	raw, err := testcsr.ServingRequest("node-1", key, testcsr.WithPadding(pad))
	require.NoError(t, err)

	// PEM spends four bytes on every three.
	assert.Greater(t, len(raw)-len(plain), pad*4/3)

	block, _ := pem.Decode(raw)
	require.NotNil(t, block)

	req, err := x509.ParseCertificateRequest(block.Bytes)
	require.NoError(t, err)
	require.NoError(t, req.CheckSignature())

	assert.Equal(t, "system:node:node-1", req.Subject.CommonName)
	assert.Equal(t, []string{"node-1"}, req.DNSNames)

	var padding []byte

	for _, ext := range req.Extensions {
		if ext.Id.Equal(testcsr.PaddingExtension) {
			padding = ext.Value
		}
	}

	assert.Len(t, padding, pad)
}
