package cli

import (
	"strings"
	"testing"
)

// TestFactorAndLockoutVerbs covers the second-factor and lockout calls of
// the admin API: the request each verb sends and how the answer shows.
func TestFactorAndLockoutVerbs(t *testing.T) {
	const id = "0b1e6c3a-8d2f-4f7e-9a51-3c2d1e0f9a8b"
	tests := []struct {
		name         string
		args         []string
		status       int
		body         string
		method, path string
		want         []string // stdout, runs of spaces collapsed
	}{
		{name: "factors", args: []string{"user", "factors", id},
			body:   `{"totp":true,"recovery_codes_left":7,"passkeys":[{"id":"cGsx","name":"YubiKey","created_at":"2025-01-01T00:00:00Z"}]}`,
			method: "GET", path: "/users/" + id + "/factors",
			want: []string{"authenticator app true\n", "recovery codes left 7\n", "passkeys 1\n", "PASSKEY NAME CREATED_AT LAST_USED_AT\ncGsx YubiKey 2025-01-01T00:00:00Z -\n"}},
		{name: "factors, none", args: []string{"user", "factors", id},
			body:   `{"totp":false,"recovery_codes_left":0,"passkeys":[]}`,
			method: "GET", path: "/users/" + id + "/factors", want: []string{"authenticator app false\n", "passkeys 0\n"}},
		{name: "totp-remove", args: []string{"user", "totp-remove", id}, status: 204,
			method: "DELETE", path: "/users/" + id + "/totp", want: []string{"removed authenticator app of user " + id + "\n"}},
		{name: "unlock", args: []string{"user", "unlock", id}, status: 204,
			method: "DELETE", path: "/users/" + id + "/lockouts", want: []string{"removed lockouts of user " + id + "\n"}},
		{name: "lockout list", args: []string{"lockout", "list"},
			body:   `{"data":[{"key":"pw:ann@example.com","kind":"password","count":5,"locked_until":"2025-01-01T00:15:00Z"},{"key":"ip:10.0.0.9","kind":"ip","count":20,"locked_until":"2025-01-01T01:00:00Z"}]}`,
			method: "GET", path: "/lockouts",
			want: []string{"KEY KIND USER FAILURES LOCKED_UNTIL\n", "pw:ann@example.com password - 5 2025-01-01T00:15:00Z\n", "ip:10.0.0.9 ip - 20 2025-01-01T01:00:00Z\n"}},
		{name: "lockout list empty", args: []string{"lockouts", "list"}, body: `{"data":[]}`, method: "GET", path: "/lockouts", want: []string{"no lockouts\n"}},
		{name: "lockout clear escapes the key", args: []string{"lockout", "clear", "ip:10.0.0.9/x"}, status: 204,
			method: "DELETE", path: "/lockouts/ip:10.0.0.9%2Fx", want: []string{"deleted lockout ip:10.0.0.9/x\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			status := tc.status
			if status == 0 {
				status = 200
			}
			f.answer(status, tc.body)
			r := run(t, f.env(), "", tc.args...)
			if r.code != ExitOK {
				t.Fatalf("exit %d; stderr %q", r.code, r.stderr)
			}
			req := f.only(t)
			if req.Method != tc.method || req.Path != "/admin/v1"+tc.path || req.Body != "" {
				t.Errorf("request: got %s %s %q, want %s /admin/v1%s without a body", req.Method, req.Path, req.Body, tc.method, tc.path)
			}
			out := spaces.ReplaceAllString(r.stdout, " ")
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
				}
			}
		})
	}
}
