package node

import (
	"context"
	"net"
	"net/url"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/oidc"
)

// adminPeople adapts the provider's token check to the admin API's
// PersonTokens: people who signed in through the built-in client
// administer the site with the access token it issued them.
type adminPeople struct{ p *oidc.Provider }

var _ admin.PersonTokens = adminPeople{}

func (a adminPeople) Check(ctx context.Context, token string) (admin.PersonToken, error) {
	t, err := a.p.CheckAdminToken(ctx, token)
	return admin.PersonToken{Active: t.Active, Sub: t.Sub, ClientID: t.ClientID, ACR: t.ACR}, err
}

// adminCallbacks are the built-in client's redirect URIs besides the
// issuer's: the console's callback on the admin listener when the console
// is served there (none otherwise). The listener's base URL is its
// scheme (https with --tls-cert) and its address as the listener has it;
// a wildcard host (0.0.0.0, ::, empty) is named by the issuer's host
// name, the name browsers reach the site by.
func (n *Node) adminCallbacks() []string {
	if !n.separateAdmin() {
		return nil
	}
	addr := n.cfg.AdminAddr
	if n.adminLn != nil {
		addr = n.adminLn.Addr().String()
	} else if n.cfg.AdminListener != nil {
		addr = n.cfg.AdminListener.Addr().String()
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		u, err := url.Parse(n.cfg.Issuer)
		if err != nil {
			return nil
		}
		host = u.Hostname()
	}
	scheme := "http"
	if n.cfg.TLSCert != "" {
		scheme = "https"
	}
	return []string{scheme + "://" + net.JoinHostPort(host, port) + oidc.AdminCallbackPath}
}
