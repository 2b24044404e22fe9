package session

import (
	"errors"
	"net/http"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
)

// The SSO cookie holds a random secret (authn.NewID); the store keeps
// only its authn.HashToken, so a read of the store reveals no cookie.

// maxSecret bounds the SSO cookie value read: ours is 43 characters.
const maxSecret = 64

// secret is the browser's SSO cookie value, "" when it has none or one
// too long to be ours.
func (m *Manager) secret(r *http.Request) string {
	if v := m.Cookie(r, SSOCookie, "/"); len(v) <= maxSecret {
		return v
	}
	return ""
}

// SetSSOCookie gives the browser the secret of the SSO session it just
// opened, until the session's end.
func (m *Manager) SetSSOCookie(w http.ResponseWriter, secret string, end time.Time) {
	m.SetCookie(w, SSOCookie, secret, "/", end)
}

// ClearSSOCookie tells the browser to drop its SSO cookie.
func (m *Manager) ClearSSOCookie(w http.ResponseWriter) { m.ClearCookie(w, SSOCookie, "/") }

// Live finds the browser's usable SSO session: the cookie's secret names
// a session that is live at now and whose person still exists. catchUp,
// when not nil, is asked once whether a read index brought the state up
// to date when the session was not found (fsm.State.LiveSSOSession). err
// is only for a store problem.
func (m *Manager) Live(r *http.Request, now time.Time, catchUp func() bool) (fsm.SSOSession, fsm.User, bool, error) {
	secret := m.secret(r)
	if secret == "" {
		return fsm.SSOSession{}, fsm.User{}, false, nil
	}
	return m.state.LiveSSOSession(authn.HashToken(secret), now, catchUp)
}

// Named returns the SSO session the browser's cookie names, live or not:
// found is false when the browser has no cookie or the store no such
// session. err is only for a store problem.
func (m *Manager) Named(r *http.Request) (s fsm.SSOSession, found bool, err error) {
	secret := m.secret(r)
	if secret == "" {
		return fsm.SSOSession{}, false, nil
	}
	s, err = m.state.SSOSessionByToken(authn.HashToken(secret))
	if errors.Is(err, fsm.ErrNotFound) {
		return fsm.SSOSession{}, false, nil
	}
	if err != nil {
		return fsm.SSOSession{}, false, err
	}
	return s, true, nil
}
