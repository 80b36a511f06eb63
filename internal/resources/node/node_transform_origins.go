package node

import "github.com/talos-ccm/talos-ccm/api/proto/specs"

// Keys of NodeTransform.origins: the origin of each desired value (the fact or rule it came from) is
// recorded under the value's key. ccmctl reads them back with the same builders.
const (
	// OriginProviderID is the key of the providerID's origin.
	OriginProviderID = "providerID"
	// OriginFactHostname is the key that says where the hostname fact came from when it did not come from
	// Talos.
	OriginFactHostname = "fact/hostname"
)

// Kinds of keyed values in NodeTransform.origins.
const (
	OriginKindLabel            = "label"
	OriginKindAnnotation       = "annotation"
	OriginKindTaint            = "taint"
	OriginKindAddress          = "address"
	OriginKindPlatformMetadata = "platformMetadata"
)

// OriginKey is the key of the origin of one value of a kind: "label/KEY", "annotation/KEY", "taint/KEY",
// "platformMetadata/FACT".
func OriginKey(kind, name string) string {
	return kind + "/" + name
}

// OriginAddressKey is the key under which NodeTransforms written before address_origins kept the origin of
// one Node address in their origins: "address/TYPE/ADDRESS".
func OriginAddressKey(typ, address string) string {
	return OriginKey(OriginKindAddress, typ+"/"+address)
}

// AddressOrigin returns the origin of the address of a NodeTransform of the same type and value as a: its
// address_origins entry, or for a NodeTransform written before them (read from an older talos-ccm's
// database or API), its origins entry.
func AddressOrigin(spec *specs.NodeTransformSpec, a *specs.NodeAddress) string {
	for i, b := range spec.GetAddresses() {
		if b.GetType() == a.GetType() && b.GetAddress() == a.GetAddress() && i < len(spec.GetAddressOrigins()) {
			return spec.GetAddressOrigins()[i]
		}
	}

	return spec.GetOrigins()[OriginAddressKey(a.GetType(), a.GetAddress())]
}
