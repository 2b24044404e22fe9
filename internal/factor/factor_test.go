package factor

import (
	"strings"
	"testing"
	"time"
)

func TestTOTPStep(t *testing.T) {
	secret, uri, err := NewTOTPSecret("id.example.com", "ann@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(uri, "otpauth://totp/") || !strings.Contains(uri, "period=30") || !strings.Contains(uri, "digits=6") {
		t.Fatalf("uri %q", uri)
	}
	now := time.Unix(1_800_000_000, 0)
	code := func(at time.Time) string {
		c, err := TOTPCode(secret, at)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	base := now.Unix() / TOTPPeriod
	// A code two steps old is refused, unless by chance (1 in 10^6) it is
	// also a code of the window.
	old := code(now.Add(-60 * time.Second))
	collides := old == code(now) || old == code(now.Add(-30*time.Second)) || old == code(now.Add(30*time.Second))
	cases := []struct {
		name     string
		code     string
		ok       bool
		wantStep int64
	}{
		{"current", code(now), true, base},
		{"spaced", code(now)[:3] + " " + code(now)[3:], true, base},
		{"previous step (clock skew)", code(now.Add(-30 * time.Second)), true, base - 1},
		{"next step", code(now.Add(30 * time.Second)), true, base + 1},
		{"two steps old", old, collides, 0},
		{"too short", "12345", false, 0},
		{"letters", "abcdef", false, 0},
		{"empty", "", false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			step, ok := TOTPStep(secret, tc.code, now)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if ok && tc.name != "two steps old" && step != tc.wantStep {
				t.Fatalf("step %d, want %d", step, tc.wantStep)
			}
		})
	}
}

func TestRecoveryCodes(t *testing.T) {
	codes, hashes := NewRecoveryCodes()
	if len(codes) != RecoveryCodeCount || len(hashes) != RecoveryCodeCount {
		t.Fatalf("%d codes, %d hashes", len(codes), len(hashes))
	}
	seen := map[string]bool{}
	for i, c := range codes {
		if len(c) != 11 || c[5] != '-' || seen[c] {
			t.Fatalf("code %q", c)
		}
		seen[c] = true
		for _, typed := range []string{c, strings.ToUpper(c), strings.ReplaceAll(c, "-", ""), " " + c[:5] + " " + c[6:] + " "} {
			if RecoveryHash(typed) != hashes[i] {
				t.Fatalf("%q as typed %q does not match its hash", c, typed)
			}
		}
	}
}

func FuzzTOTPStep(f *testing.F) {
	secret, _, _ := NewTOTPSecret("x", "y")
	for _, s := range []string{"123456", " 12 34 56 ", "", "ääääää", strings.Repeat("9", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		if _, ok := TOTPStep(secret, code, time.Unix(1_800_000_000, 0)); ok && len(NormalizeCode(code)) != 6 {
			t.Fatalf("accepted %q", code)
		}
	})
}
