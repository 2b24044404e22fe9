package httpx

import (
	"net/url"
	"strings"
)

// AppendQuery adds params to a registered redirect URI, keeping the URI's
// own query byte for byte (clients compare redirect URIs exactly) and any
// fragment last. Used for the authorization response and the logout
// redirect.
func AppendQuery(base string, params url.Values) string {
	frag := ""
	if i := strings.IndexByte(base, '#'); i >= 0 {
		base, frag = base[:i], base[i:]
	}
	sep := "?"
	switch {
	case strings.HasSuffix(base, "?") || strings.HasSuffix(base, "&"):
		sep = ""
	case strings.Contains(base, "?"):
		sep = "&"
	}
	return base + sep + params.Encode() + frag
}
