package signin

import (
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
)

func TestACROf(t *testing.T) {
	for _, tc := range []struct {
		amr  []string
		want string
	}{
		{[]string{"pwd"}, authn.ACRPwd},
		{[]string{"sms"}, authn.ACRPhone},
		{[]string{"pwd", "otp"}, authn.ACRMFA},
		{[]string{"sms", "hwk"}, authn.ACRMFA},
		{[]string{"pwd", "rcv"}, authn.ACRPwd},
		{[]string{"sms", "rcv"}, authn.ACRPhone},
		{[]string{"sms", "pwd"}, authn.ACRPwd}, // two openers are not two factors
		{[]string{"otp"}, authn.ACRPhone},      // never happens: sessions open with pwd or sms
	} {
		if got := acrOf(tc.amr); got != tc.want {
			t.Errorf("acrOf(%v) = %s, want %s", tc.amr, got, tc.want)
		}
	}
}

// TestStepUpACR: a step-up after an upstream's sign-in counts only what
// was verified here, beside the upstream's sign-in as a password.
func TestStepUpACR(t *testing.T) {
	const idp = "00000000-0000-4000-8000-0000000001d1"
	for _, tc := range []struct {
		name   string
		s      fsm.SSOSession
		method string
		want   string
	}{
		{"password session, recovery code", fsm.SSOSession{AMR: []string{"pwd"}, ACR: authn.ACRPwd}, "rcv", authn.ACRPwd},
		{"password session, authenticator", fsm.SSOSession{AMR: []string{"pwd"}, ACR: authn.ACRPwd}, "otp", authn.ACRMFA},
		{"upstream otp, recovery code here", fsm.SSOSession{ProviderID: idp, AMR: []string{"pwd", "otp"}, ACR: authn.ACRPwd}, "rcv", authn.ACRPwd},
		{"upstream hwk, recovery code here", fsm.SSOSession{ProviderID: idp, AMR: []string{"hwk"}, ACR: authn.ACRPwd}, "rcv", authn.ACRPwd},
		{"upstream pwd, authenticator here", fsm.SSOSession{ProviderID: idp, AMR: []string{"pwd"}, ACR: authn.ACRPwd}, "otp", authn.ACRMFA},
		{"upstream pwd, passkey here", fsm.SSOSession{ProviderID: idp, AMR: []string{"pwd"}, ACR: authn.ACRPwd}, "hwk", authn.ACRMFA},
		{"trusted upstream mfa stays", fsm.SSOSession{ProviderID: idp, AMR: []string{"pwd", "otp"}, ACR: authn.ACRMFA}, "rcv", authn.ACRMFA},
	} {
		if got := stepUpACR(tc.s, tc.method); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestNormalizePhone(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"+15551234567", "+15551234567", true},
		{" +1 (555) 123-4567 ", "+15551234567", true},
		{"0044 20 7946 0958", "+442079460958", true},
		{"+1.555.123.4567", "+15551234567", true},
		{"5551234567", "5551234567", false}, // no country code
		{"+0123456789", "+0123456789", false},
		{"+1555", "+1555", false},
		{"+1234567890123456", "+1234567890123456", false}, // 16 digits
		{"+1555abc4567", "+1555abc4567", false},
		{"", "", false},
	} {
		got, ok := normalizePhone(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("normalizePhone(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzNormalizePhone(f *testing.F) {
	for _, s := range []string{"+15551234567", "00 44 1234 5678", "((((", "+", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if p, ok := normalizePhone(s); ok && (len(p) > 16 || p[0] != '+') {
			t.Fatalf("accepted %q as %q", s, p)
		}
	})
}

func TestPasswordDelay(t *testing.T) {
	cases := []struct {
		attempts int
		want     time.Duration
	}{
		{1, 0}, {delayFree, 0}, {delayFree + 1, delayStep}, {delayFree + 4, 4 * delayStep}, {100, delayMax},
	}
	for _, c := range cases {
		if got := passwordDelay(c.attempts); got != c.want {
			t.Errorf("passwordDelay(%d): got %s, want %s", c.attempts, got, c.want)
		}
	}
}

func TestPasswordRulesKeyPerAccountAndAddress(t *testing.T) {
	a := passwordRules("Ann@Example.com", "192.0.2.1")
	b := passwordRules("ann@example.com", "192.0.2.2")
	if a[0].Key == b[0].Key || a[1].Key != b[1].Key || a[2].Key == b[2].Key {
		t.Fatalf("got %v and %v: want per-address keys apart and the account key shared", a, b)
	}
	if a[0].Limit != 10 || a[1].Limit != 100 || a[2].Limit != 50 {
		t.Fatalf("limits: %d %d %d", a[0].Limit, a[1].Limit, a[2].Limit)
	}
}
