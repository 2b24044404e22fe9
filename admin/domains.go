package admin

import (
	"fmt"
	"strings"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/fsm"
)

// maxEmailDomains bounds an organization's registration domains (as fsm
// does).
const maxEmailDomains = 100

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
	if !strings.Contains(s, ".") {
		return "", fmt.Errorf("must have at least two labels, such as example.com")
	}
	d, ok := email.ASCIIDomain(s)
	if !ok {
		return "", fmt.Errorf("must be a valid domain name such as example.com")
	}
	labels := strings.Split(d, ".")
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", fmt.Errorf("must be a domain name, not an IP address")
	}
	return d, nil
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
