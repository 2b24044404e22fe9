package admin

import (
	"fmt"
	"strings"

	"golang.org/x/net/idna"

	"github.com/oidcd/oidcd/fsm"
)

// maxEmailDomains bounds an organization's registration domains (as fsm
// does).
const maxEmailDomains = 100

// domainProfile maps a domain name as a person types it to the form the
// state keeps: UTS 46 mapping for lookup (case folding, width), the
// label rules of RFC 5891 (LDH after conversion, hyphens, joiners, the
// Bidi rule) and DNS lengths, then A-labels (punycode) for what is not
// ASCII. Nontransitional: "ß" stays itself (xn--...), as registries and
// today's browsers treat it.
var domainProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.VerifyDNSLength(true), idna.Transitional(false))

// normalDomain returns s as a registration domain: lower case, ASCII
// (punycode for an internationalized name), without the trailing dot of
// a fully qualified name; or why it cannot be one.
func normalDomain(s string) (string, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return "", fmt.Errorf("must not be empty")
	case strings.Contains(s, "@"):
		return "", fmt.Errorf("must be a domain name such as example.com, without @")
	case strings.ContainsAny(s, "/:[] \t\r\n"):
		return "", fmt.Errorf("must be a domain name such as example.com, not an address or URL")
	}
	s = strings.TrimSuffix(s, ".")
	d, err := domainProfile.ToASCII(s)
	if err != nil {
		return "", fmt.Errorf("must be a valid domain name such as example.com")
	}
	labels := strings.Split(d, ".")
	if len(labels) < 2 {
		return "", fmt.Errorf("must have at least two labels, such as example.com")
	}
	for _, l := range labels {
		if !ldhLabel(l) {
			return "", fmt.Errorf("must be a valid domain name such as example.com")
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", fmt.Errorf("must be a domain name, not an IP address")
	}
	return d, nil
}

// ldhLabel reports whether l is a DNS label of letters, digits and
// hyphens, 1 to 63 long, neither starting nor ending with a hyphen: what
// the mapping leaves, checked again here.
func ldhLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// registration checks an organization's registration settings as they
// will be stored, their domains normalized in place: at most
// maxEmailDomains, each valid and given once; enabled needs at least one.
func (p *problems) registration(r *fsm.Registration) {
	if len(r.EmailDomains) > maxEmailDomains {
		p.add("registration.email_domains", codeTooMany, "must hold at most %d domains", maxEmailDomains)
		return
	}
	seen := map[string]int{}
	for i, raw := range r.EmailDomains {
		field := fmt.Sprintf("registration.email_domains[%d]", i)
		d, err := normalDomain(raw)
		if err != nil {
			p.add(field, codeInvalid, "%s", err)
			continue
		}
		if j, dup := seen[d]; dup {
			p.add(field, "duplicate", "is %s again, as email_domains[%d]", d, j)
			continue
		}
		seen[d] = i
		r.EmailDomains[i] = d
	}
	if r.Enabled && len(r.EmailDomains) == 0 {
		p.add("registration.email_domains", codeRequired, "must name at least one domain when registration is enabled")
	}
}
