package node_test

import (
	"testing"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/internal/testkit/ldaptest"
	"github.com/oidcd/oidcd/testcluster"
)

// BenchmarkDirectorySignIn is BenchmarkPasswordSignIn for a person of a
// local slapd (LDAPS, an {SSHA} password, two groups): a fresh browser
// per sign-in, the search and the bind, the DirectorySignIn write, the
// session, the code, the exchange and go-oidc's check of the ID token.
// Run it beside BenchmarkPasswordSignIn, whose argon2id is the local
// sign-in's ceiling.
func BenchmarkDirectorySignIn(b *testing.B) {
	s := ldaptest.Start(b, ldaptest.Person("ann", "ann@corp.example", ldaptest.HashedPassword(b, "ann-directory-pw"))+
		ldaptest.Group("staff", "ann")+ldaptest.Group("admins", "ann"))
	c, w := benchNode(b)
	registerDirectory(b, c, s, w)
	r := newRPTB(b, c, w.publicID, "", w.cb, gooidc.ScopeOpenID)
	dw := world{email: "ann@corp.example", password: "ann-directory-pw", cb: w.cb}
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			br := testcluster.NewBrowser(b)
			pkce := oauth2.GenerateVerifier()
			exchangeAndVerify(b, r, benchSignIn(b, c, br, r, dw, pkce), pkce)
		}
	})
}
