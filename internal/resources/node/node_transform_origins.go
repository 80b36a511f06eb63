package node

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

// OriginAddressKey is the key of the origin of one Node address: "address/TYPE/ADDRESS".
func OriginAddressKey(typ, address string) string {
	return OriginKey(OriginKindAddress, typ+"/"+address)
}
