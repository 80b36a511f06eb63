// Package testcsr builds kubelet certificate signing requests for talos-ccm's end-to-end tests and its
// benchmark, hostile ones included, so that both file the same requests.
package testcsr

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"io"
	"math/big"
	"slices"
)

// MultiPrimeKey is an RSA key whose modulus is the product of many small primes. A kubelet makes one of
// any size in seconds and signs with it at the cost of its small primes (the Chinese remainder theorem),
// while verifying a signature costs the square of the whole size; the apiserver takes such a request, as
// its signature verifies.
type MultiPrimeKey struct {
	public rsa.PublicKey
	primes []*big.Int
	// exponents are the private exponent modulo each prime minus one.
	exponents []*big.Int
}

// sha256DigestInfo is the DER prefix of a SHA-256 digest in a PKCS #1 v1.5 signature.
var sha256DigestInfo = []byte{0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20}

// NewMultiPrimeKey makes a key of count distinct primes of bits bits each (a modulus of at least
// count×bits-count bits), with the public exponent 2^31-1, the largest Go takes, which makes a
// verification the costliest.
func NewMultiPrimeKey(count, bits int) (*MultiPrimeKey, error) {
	key := &MultiPrimeKey{public: rsa.PublicKey{N: big.NewInt(1), E: 1<<31 - 1}}
	e := big.NewInt(int64(key.public.E))

	for len(key.primes) < count {
		p, err := rand.Prime(rand.Reader, bits)
		if err != nil {
			return nil, fmt.Errorf("failed to generate prime: %w", err)
		}

		// A prime whose p-1 shares a factor with e has no private exponent, and a repeated prime would not
		// make a square-free modulus: both are drawn again.
		d := new(big.Int).ModInverse(e, new(big.Int).Sub(p, big.NewInt(1)))
		if d == nil || slices.ContainsFunc(key.primes, func(q *big.Int) bool { return q.Cmp(p) == 0 }) {
			continue
		}

		key.primes = append(key.primes, p)
		key.exponents = append(key.exponents, d)
		key.public.N.Mul(key.public.N, p)
	}

	return key, nil
}

// Bits is the size of the key's modulus.
func (k *MultiPrimeKey) Bits() int { return k.public.N.BitLen() }

// Public implements crypto.Signer.
func (k *MultiPrimeKey) Public() crypto.PublicKey { return &k.public }

// Sign implements crypto.Signer for a SHA-256 digest: PKCS #1 v1.5, one exponentiation per prime.
func (k *MultiPrimeKey) Sign(_ io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if opts.HashFunc() != crypto.SHA256 || len(digest) != crypto.SHA256.Size() {
		return nil, fmt.Errorf("failed to sign: only SHA-256 digests are supported, not %v", opts.HashFunc())
	}

	size := k.public.Size()
	encoded := bytes.Repeat([]byte{0xff}, size)
	encoded[0], encoded[1] = 0, 1
	tail := append(slices.Clone(sha256DigestInfo), digest...)
	encoded[size-len(tail)-1] = 0
	copy(encoded[size-len(tail):], tail)

	m := new(big.Int).SetBytes(encoded)
	signature := new(big.Int)

	for i, p := range k.primes {
		others := new(big.Int).Div(k.public.N, p)
		part := new(big.Int).Exp(new(big.Int).Mod(m, p), k.exponents[i], p)
		part.Mul(part, new(big.Int).ModInverse(new(big.Int).Mod(others, p), p))
		part.Mul(part, others)
		signature.Add(signature, part)
	}

	return signature.Mod(signature, k.public.N).FillBytes(make([]byte, size)), nil
}
