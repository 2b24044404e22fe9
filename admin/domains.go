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
	p.domainList("registration.email_domains", r.EmailDomains, false)
	if r.Enabled && len(r.EmailDomains) == 0 {
		p.add("registration.email_domains", codeRequired, "must name at least one domain when registration is enabled")
	}
}

// domainList normalizes the domains of list in place (normalDomain),
// adding a problem under field[i] for one that is not a domain name or is
// given twice; with noWildcard, a "*" is named as such rather than as a
// bad name.
func (p *problems) domainList(field string, list []string, noWildcard bool) {
	seen := map[string]int{}
	for i, raw := range list {
		at := fmt.Sprintf("%s[%d]", field, i)
		if noWildcard && strings.Contains(raw, "*") {
			p.add(at, codeInvalid, "must be a domain name such as example.com, without a wildcard: a subdomain is listed on its own")
			continue
		}
		d, err := normalDomain(raw)
		if err != nil {
			p.add(at, codeInvalid, "%s", err)
			continue
		}
		if j, dup := seen[d]; dup {
			p.add(at, "duplicate", "is %s again, as email_domains[%d]", d, j)
			continue
		}
		seen[d] = i
		list[i] = d
	}
}
