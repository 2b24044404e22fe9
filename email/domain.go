package email

import (
	"strings"

	"golang.org/x/net/idna"
)

// domainProfile maps a domain name as a person types it to the form it is
// stored and compared in: UTS 46 mapping for lookup (case folding,
// width), the label rules of RFC 5891 (the Bidi rule, joiners) and DNS
// lengths, then A-labels (punycode) for what is not ASCII.
// Nontransitional: "ß" stays itself (xn--...), as registries and today's
// browsers treat it.
var domainProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.VerifyDNSLength(true), idna.Transitional(false))

// ASCIIDomain returns domain (no trailing dot) in the one form an
// organization's email_domains hold and a registering address's domain is
// compared in: lower case, IDNA ASCII, two labels or more of letters,
// digits and inner hyphens. ok is false for what cannot be such a name.
// The admin API stores domains through it and the registration page
// compares through it, so the two cannot drift apart.
func ASCIIDomain(domain string) (ascii string, ok bool) {
	d, err := domainProfile.ToASCII(domain)
	if err != nil {
		return "", false
	}
	d = strings.ToLower(d)
	labels := strings.Split(d, ".")
	if len(labels) < 2 || len(d) > 253 {
		return "", false
	}
	for _, l := range labels {
		if !ldhLabel(l) {
			return "", false
		}
	}
	return d, true
}

// ldhLabel reports whether l is a DNS label of letters, digits and
// hyphens, 1 to 63 long, neither starting nor ending with a hyphen.
func ldhLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		if c := l[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
