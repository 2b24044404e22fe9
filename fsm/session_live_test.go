package fsm

import (
	"testing"
	"time"
)

// TestLiveSSOSession: a session is found while live and its person
// exists; an unknown token asks catchUp once and finds what the catch-up
// brought; an idle or expired session is none.
func TestLiveSSOSession(t *testing.T) {
	h := signedIn(t)
	st := h.f.State()
	for _, tc := range []struct {
		name     string
		hash     string
		now      time.Time
		arrives  bool // catchUp opens the session "tok2" before it returns
		want     bool
		catchUps int
	}{
		{"live", "tok1", t0.Add(time.Minute), false, true, 0},
		{"idle past its deadline", "tok1", t0.Add(2 * time.Hour), false, false, 0},
		{"unknown, nothing arrives", "nope", t0, false, false, 1},
		{"unknown, opened elsewhere a moment ago", "tok2", t0, true, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			catchUp := func() bool {
				calls++
				if tc.arrives {
					h.mustApply(TypeStartSSOSession, StartSSOSession{TokenHash: "tok2", Session: SSOSession{
						ID: "sso2", UserID: userA, AuthTime: t0, AMR: []string{"pwd"}, ACR: "pwd",
						CreatedAt: t0, LastSeen: t0, IdleExpiresAt: t0.Add(time.Hour), ExpiresAt: t0.Add(8 * time.Hour),
					}})
				}
				return true
			}
			s, u, ok, err := st.LiveSSOSession(tc.hash, tc.now, catchUp)
			if err != nil || ok != tc.want || calls != tc.catchUps {
				t.Fatalf("ok %v err %v catch-ups %d; want ok %v, %d catch-ups", ok, err, calls, tc.want, tc.catchUps)
			}
			if ok && (u.ID != userA || s.UserID != userA) {
				t.Errorf("session %+v of %+v", s, u)
			}
		})
	}
}
