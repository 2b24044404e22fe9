package signin

import (
	"net/mail"
	"strings"
	"unicode"

	"github.com/oidcd/oidcd/email"

	"github.com/oidcd/oidcd/internal/authn"
)

// An address a person types to register, or as the new address of their
// account, becomes the address an account is made for, so it is read
// strictly (normalizeAddress): one bare address as net/mail parses it, no
// display name, no comment, no quoted local part, exactly one '@', no
// space or control character (a CR or LF never reaches a mail header), an
// ASCII local part, and a domain without a trailing dot whose IDNA ASCII
// form (UTS #46 lookup mapping, then punycode) is what is compared with an
// organization's email_domains. So "user@allowed.example@evil.example",
// "user@allowed.example." and a look-alike such as "user@аllowed.example"
// (a Cyrillic а) are refused or land outside allowed.example, while
// "User@Allowed.Example" is user@allowed.example.

// normalizeAddress returns typed as the address an account is made for
// (lower case, the domain in its IDNA ASCII form), or the message (a
// catalog key) that tells the person what is wrong with it.
func normalizeAddress(typed string) (string, string) {
	s := strings.TrimSpace(typed)
	if s == "" || len(s) > authn.MaxEmailLen {
		return "", keyBadAddress
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar {
			return "", keyBadAddress
		}
	}
	if strings.Count(s, "@") != 1 {
		return "", keyBadAddress
	}
	parsed, err := mail.ParseAddress(s)
	if err != nil || parsed.Name != "" || parsed.Address != s {
		return "", keyBadAddress
	}
	local, domain, _ := strings.Cut(s, "@")
	if !dotAtom(local) {
		return "", keyAddressLocal
	}
	if domain == "" || strings.HasSuffix(domain, ".") || strings.HasPrefix(domain, ".") {
		return "", keyBadAddress
	}
	ascii, ok := email.ASCIIDomain(domain)
	if !ok {
		return "", keyBadAddress
	}
	out := strings.ToLower(local) + "@" + ascii
	if len(out) > authn.MaxEmailLen {
		return "", keyBadAddress
	}
	return out, ""
}

// dotAtom reports whether s is an RFC 5322 dot-atom of ASCII characters
// of at most 64 bytes: atext runs separated by single dots.
func dotAtom(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.':
		case strings.IndexByte("!#$%&'*+-/=?^_`{|}~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
