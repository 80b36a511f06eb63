package nodetransform

import (
	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/sharedstrings"
)

// shareStrings replaces the strings of spec that repeat from Node to Node with their shared copies (see
// sharedstrings): the labels, the origins (the addresses' too) and the platform. Build puts together the origins ("label/" + key, "Talos platformMetadata." + fact) and
// reads the label values from each machine's facts, so every NodeTransform carried copies of its own of the
// same strings: about 550 bytes of each NodeTransform's 2.9 KB in the state, at a dozen origins per Node.
func shareStrings(spec *specs.NodeTransformSpec) {
	share := sharedstrings.Share

	for k, v := range spec.GetLabels() {
		spec.Labels[k] = share(v)
	}

	if len(spec.GetOrigins()) > 0 {
		origins := make(map[string]string, len(spec.GetOrigins()))

		for k, v := range spec.GetOrigins() {
			origins[share(k)] = share(v)
		}

		spec.Origins = origins
	}

	for i, origin := range spec.GetAddressOrigins() {
		spec.AddressOrigins[i] = share(origin)
	}

	spec.Platform = share(spec.GetPlatform())
}
