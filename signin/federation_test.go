package signin

import (
	"fmt"
	"testing"
	"time"

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

// TestStaleUpstream: an upstream that ignored prompt=login or max_age,
// and says so in auth_time, does not sign the person in here.
func TestStaleUpstream(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	sent := now.Add(-30 * time.Second)
	for _, tc := range []struct {
		name     string
		authTime time.Time
		fresh    bool
		maxAge   int64
		stale    bool
	}{
		{"no auth_time, prompt=login: taken at its word", time.Time{}, true, -1, false},
		{"no auth_time, max_age: taken at its word", time.Time{}, false, 60, false},
		{"prompt=login, signed in after the departure", now.Add(-10 * time.Second), true, -1, false},
		{"prompt=login, a clock a minute behind", sent.Add(-time.Minute), true, -1, false},
		{"prompt=login, yesterday's session", now.Add(-24 * time.Hour), true, -1, true},
		{"no prompt, yesterday's session", now.Add(-24 * time.Hour), false, -1, false},
		{"max_age=600, ten minutes ago", now.Add(-10 * time.Minute), false, 600, false},
		{"max_age=600, an hour ago", now.Add(-time.Hour), false, 600, true},
		{"max_age=0, just now", now.Add(-20 * time.Second), false, 0, false},
		{"max_age=0, five minutes ago", now.Add(-5 * time.Minute), false, 0, true},
		{"a huge max_age", now.Add(-24 * time.Hour), false, 1 << 62, false},
	} {
		if got := staleUpstream(tc.authTime, sent, now, tc.fresh, tc.maxAge) != ""; got != tc.stale {
			t.Errorf("%s: stale %v, want %v", tc.name, got, tc.stale)
		}
	}
}
