package oidc

import "testing"

func TestHarnessSeeds(t *testing.T) {
	h := newHarness(t)
	if code := h.signedInCode(hPublic, hUser, hOrgA, []string{"openid"}, "", "verifier-verifier-verifier-verifier-verifier"); code == "" {
		t.Fatal("no code")
	}
	if _, err := h.p.sessions.Box(); err != nil {
		t.Fatal(err)
	}
}
