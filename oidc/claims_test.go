package oidc

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
)

func TestClaimsEncoding(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	code := fsm.Code{ClientID: "app", UserID: "u", OrgID: "o", SID: "s", AuthTime: now, RequestedAt: now, ACR: ACRPwd}
	admin := adminCode{SSOSessionID: "sso", UserID: "u", AuthTime: now, RequestedAt: now, ACR: ACRMFA}.code(now.Add(time.Minute))
	for _, c := range []struct {
		name   string
		claims any
		want   []string
		absent []string
	}{
		{"access, nil lists", newAccessClaims("https://issuer", code, "j", now, now.Add(time.Minute)),
			[]string{`"aud":[]`, `"amr":[]`, `"scp":[]`, `"exp":1800000060`, `"organization_id":"o"`}, []string{"client_id", "azp", "nonce"}},
		{"id, one audience", newIDClaims("https://issuer", code, []byte("at"), now, now.Add(time.Minute)),
			[]string{`"aud":["app"]`, `"amr":[]`, `"rat":1800000000`, `"organization_id":"o"`}, []string{"nonce", "scp"}},
		{"access of the built-in client", adminCodes{&Provider{cfg: Config{Issuer: "https://issuer"}}}.accessClaims(admin, "j", now, now.Add(time.Minute)),
			[]string{`"sid":"sso"`, `"client_id":"oidcd-admin"`, `"aud":[]`}, []string{"organization_id", "azp"}},
		{"id of the built-in client", newIDClaims("https://issuer", admin, []byte("at"), now, now.Add(time.Minute)),
			[]string{`"aud":["oidcd-admin"]`, `"sid":"sso"`}, []string{"organization_id", "client_id"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.claims)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("got %s, want it to contain %q", b, w)
				}
			}
			for _, a := range c.absent {
				if strings.Contains(string(b), `"`+a+`"`) {
					t.Errorf("got %s, want no %q", b, a)
				}
			}
		})
	}
}

func TestAtHash(t *testing.T) {
	// OpenID Connect Core 1.0, appendix A.3 (RS256).
	if got, want := atHash([]byte("jHkWEdUXMU1BwAsC4vtUsZwnNvTIxEl0z9K3vx5KF0Y")), "77QmUPtjPfzWtF2AnpK9RQ"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
