package admin

import (
	"strings"
	"testing"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// TestImportArgon2Caps: an argon2id hash above the node's caps (8 times
// its own memory, 10 passes, 16 lanes) is refused for that person, in the
// same per-person error shape as any other bad hash and with a message
// naming the cap; one within the caps is imported. The test node hashes
// with m=64 KiB, so its memory cap is 512 KiB.
func TestImportArgon2Caps(t *testing.T) {
	e := newEnv(t)
	const salt, key = "c2FsdHNhbHRzYWx0c2FsdA", "aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g"
	users := []struct{ email, params, mention string }{
		{"ok@example.com", "m=512,t=10,p=16", ""},
		{"gib@example.com", "m=1048576,t=1,p=1", "cap of 512 KiB"},
		{"slow@example.com", "m=64,t=64,p=1", "cap of 10 passes"},
		{"wide@example.com", "m=136,t=1,p=17", "p=17 is above the cap of 16 lanes"},
	}
	var body strings.Builder
	body.WriteString(`{"users":[`)
	for i, u := range users {
		if i > 0 {
			body.WriteString(",")
		}
		body.WriteString(`{"email":"` + u.email + `","password_hash":"$argon2id$v=19$` + u.params + "$" + salt + "$" + key + `"}`)
	}
	body.WriteString("]}")
	w := e.must(200, "POST", importPath, body.String())
	ans := decodeAs[importAnswer](t, w)
	if ans.Created != 1 || ans.Failed != 3 || len(ans.Data) != len(users) {
		t.Fatalf("answer: %s", w.Body)
	}
	for i, u := range users {
		r := ans.Data[i]
		if u.mention == "" {
			if r.Status != fsm.ImportCreated || r.Error != nil {
				t.Errorf("%s: got %+v, want created", u.email, r)
			}
			continue
		}
		if r.Status != fsm.ImportFailed || r.Error == nil || r.Error.Code != httpx.CodeValidation ||
			!hasDetail(*r.Error, "password_hash", codeInvalid) || !strings.Contains(r.Error.Details[0].Message, u.mention) {
			t.Errorf("%s: got %+v, want a password_hash/%s error mentioning %q", u.email, r.Error, codeInvalid, u.mention)
		}
		if _, err := e.state.UserByEmail(u.email); err == nil {
			t.Errorf("%s: imported despite the error", u.email)
		}
	}
}
