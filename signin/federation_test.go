package signin

import (
	"fmt"
	"testing"

	"github.com/oidcd/oidcd/fsm"
)

func TestUpstreamStrength(t *testing.T) {
	cases := []struct {
		amr  []string
		keep string // the amr kept: the values oidcd's tokens use, pwd for none
		mfa  bool   // counts as two factors when the provider is trusted
	}{
		{nil, "[pwd]", false},
		{[]string{"pwd"}, "[pwd]", false},
		{[]string{"mfa"}, "[pwd]", true},
		{[]string{"pwd", "otp"}, "[pwd otp]", true},
		{[]string{"hwk"}, "[hwk]", false},
		{[]string{"face", "pin"}, "[pwd]", true}, // RFC 8176 values oidcd's tokens do not use
		{[]string{"pwd", "pwd"}, "[pwd]", false},
		{[]string{"", "pwd"}, "[pwd]", false},
	}
	for _, c := range cases {
		if got := fmt.Sprint(upstreamAMR(c.amr)); got != c.keep {
			t.Errorf("upstreamAMR(%q) = %s, want %s", c.amr, got, c.keep)
		}
		if got := upstreamMFA(c.amr); got != c.mfa {
			t.Errorf("upstreamMFA(%q) = %v, want %v", c.amr, got, c.mfa)
		}
	}
}

func TestMembershipOrgs(t *testing.T) {
	ip := fsm.IdentityProvider{OrgID: "org-own", Memberships: fsm.ProviderMemberships{GroupsClaim: "groups",
		GroupOrgs: map[string]string{"staff": "org-staff", "ops": "org-ops", "also-own": "org-own"}}}
	cases := []struct {
		name   string
		ip     fsm.IdentityProvider
		claims map[string]any
		want   string
	}{
		{"own organization and mapped groups", ip, map[string]any{"groups": []any{"staff", "unmapped", "also-own"}}, "[org-own org-staff]"},
		{"a single group as a string", ip, map[string]any{"groups": "ops"}, "[org-own org-ops]"},
		{"no claim", ip, map[string]any{}, "[org-own]"},
		{"memberships organization first", fsm.IdentityProvider{Memberships: fsm.ProviderMemberships{OrgID: "org-m"}}, nil, "[org-m]"},
		{"the site's provider with no mapping", fsm.IdentityProvider{}, map[string]any{"groups": []any{"staff"}}, "[]"},
	}
	for _, c := range cases {
		if got := fmt.Sprint(membershipOrgs(c.ip, c.claims)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestProviderForAddress(t *testing.T) {
	ips := []fsm.IdentityProvider{{Slug: "corp", EmailDomains: []string{"corp.example"}}, {Slug: "other", EmailDomains: []string{"other.example"}}}
	for addr, want := range map[string]string{
		"alice@corp.example": "corp", "ALICE@Corp.Example": "corp", "bob@other.example": "other",
		"eve@evil.corp.example": "", "corp.example": "", "": "", "x@corp.example.net": "",
	} {
		ip, ok := providerForAddress(ips, addr)
		if got := ip.Slug; got != want || ok != (want != "") {
			t.Errorf("providerForAddress(%q) = %q, %v; want %q", addr, got, ok, want)
		}
	}
}
