package csr

import "k8s.io/apimachinery/pkg/util/validation"

// isDNS1123Subdomain says whether name is a DNS-1123 subdomain, as validation.IsDNS1123Subdomain does,
// without its regular expression (0.5% of talos-ccm's CPU while 1,000 Nodes joined, for one name per
// request): at most 253 characters, lower-case alphanumerics, '-' and '.', each label between the dots
// beginning and ending with an alphanumeric.
func isDNS1123Subdomain(name string) bool {
	if name == "" || len(name) > validation.DNS1123SubdomainMaxLength {
		return false
	}

	for i := range len(name) {
		switch c := name[i]; {
		case isLowerAlphanumeric(c):
		case c == '-':
			// Within a label: a dot on either side is refused by the dot's own check.
			if i == 0 || i == len(name)-1 {
				return false
			}
		case c == '.':
			if i == 0 || i == len(name)-1 || !isLowerAlphanumeric(name[i-1]) || !isLowerAlphanumeric(name[i+1]) {
				return false
			}
		default:
			return false
		}
	}

	return true
}

func isLowerAlphanumeric(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
}
