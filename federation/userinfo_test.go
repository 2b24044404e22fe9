package federation

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/internal/testkit/testclock"
)

// An upstream whose ID token names no address (an oidcd's) is asked at its
// userinfo endpoint, and its answer is taken only for the ID token's sub.
func TestUserinfoCompletesTheAddress(t *testing.T) {
	type answer struct {
		status      int
		contentType string
		body        map[string]any
	}
	good := map[string]any{"sub": "alice-at-upstream", "email": "alice@hq.example", "email_verified": true, "name": "Alice HQ", "groups": []string{"staff"}}
	for _, tc := range []struct {
		name string
		// idEmail keeps the ID token's email claim.
		idEmail   bool
		noAT      bool   // the token response has no access_token
		tokenType string // "" is Bearer
		noDoc     bool   // discovery names no userinfo_endpoint
		answer    answer
		wantKind  error // nil: success
		wantEmail string
		verified  bool
		wantCalls int
	}{
		{name: "ID token has the address: userinfo not asked", idEmail: true, answer: answer{body: good}, wantEmail: "alice@example.com", verified: true},
		{name: "address from userinfo", answer: answer{body: good}, wantEmail: "alice@hq.example", verified: true, wantCalls: 1},
		{name: "email_verified as a string", answer: answer{body: map[string]any{"sub": "alice-at-upstream", "email": "a@hq.example", "email_verified": "true"}}, wantEmail: "a@hq.example", verified: true, wantCalls: 1},
		{name: "unverified", answer: answer{body: map[string]any{"sub": "alice-at-upstream", "email": "a@hq.example"}}, wantEmail: "a@hq.example", wantCalls: 1},
		{name: "another person's answer refused", answer: answer{body: map[string]any{"sub": "mallory", "email": "alice@hq.example", "email_verified": true}}, wantKind: ErrInvalid, wantCalls: 1},
		{name: "no sub refused", answer: answer{body: map[string]any{"email": "alice@hq.example"}}, wantKind: ErrInvalid, wantCalls: 1},
		{name: "401 is invalid", answer: answer{status: 401}, wantKind: ErrInvalid, wantCalls: 1},
		{name: "503 is unreachable", answer: answer{status: 503}, wantKind: ErrUnreachable, wantCalls: 1},
		{name: "signed answer not read", answer: answer{contentType: "application/jwt"}, wantCalls: 1},
		{name: "no access token: not asked", noAT: true, answer: answer{body: good}},
		{name: "not a bearer token: not asked", tokenType: "DPoP", answer: answer{body: good}},
		{name: "no userinfo endpoint: not asked", noDoc: true, answer: answer{body: good}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testclock.New(t0)
			op := newFakeOP(t, clock)
			var gotAuth string
			op.set(func(op *fakeOP) {
				if !tc.noDoc {
					op.doc["userinfo_endpoint"] = op.issuer + "/userinfo"
				}
				if !tc.idEmail {
					op.claims = func(c map[string]any) { delete(c, "email"); delete(c, "email_verified"); delete(c, "groups") }
				}
				op.extra = map[string]http.HandlerFunc{"/userinfo": func(w http.ResponseWriter, r *http.Request) {
					gotAuth = r.Header.Get("Authorization")
					w.Header().Set("Content-Type", "application/json")
					if tc.answer.contentType != "" {
						w.Header().Set("Content-Type", tc.answer.contentType)
					}
					if tc.answer.status != 0 {
						w.WriteHeader(tc.answer.status)
						return
					}
					if tc.answer.contentType == "application/jwt" {
						w.Write([]byte("e30.e30.sig"))
						return
					}
					json.NewEncoder(w).Encode(tc.answer.body)
				}}
				if tc.noAT || tc.tokenType != "" {
					op.tokenHandler = func(w http.ResponseWriter, r *http.Request) {
						op.mu.Lock()
						claims, s := op.idClaims(), op.signer
						op.mu.Unlock()
						body := map[string]any{"token_type": "Bearer", "id_token": sign(op.t, s, claims, nil)}
						if !tc.noAT {
							body["access_token"] = "at"
						}
						if tc.tokenType != "" {
							body["token_type"] = tc.tokenType
						}
						w.Header().Set("Content-Type", "application/json")
						json.NewEncoder(w).Encode(body)
					}
				}
			})
			tok, err := signIn(t, newTestClient(clock, Options{}), op, "")
			if calls := op.hitsOf("/userinfo"); calls != tc.wantCalls {
				t.Errorf("userinfo asked %d times, want %d", calls, tc.wantCalls)
			}
			if tc.wantKind != nil {
				wantKind(t, err, tc.wantKind)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantCalls > 0 && gotAuth != "Bearer at" {
				t.Errorf("userinfo Authorization %q", gotAuth)
			}
			if tok.Email != tc.wantEmail || tok.EmailVerified != tc.verified {
				t.Errorf("email %q verified %v, want %q %v", tok.Email, tok.EmailVerified, tc.wantEmail, tc.verified)
			}
			if tc.wantEmail == "alice@hq.example" {
				if tok.Name != "Alice" || strings.Join(StringsClaim(tok.Claims, "groups"), " ") != "staff" {
					t.Errorf("name %q (the ID token's wins), groups %v (userinfo's fill in)", tok.Name, StringsClaim(tok.Claims, "groups"))
				}
			}
		})
	}
}
