package fsm

import (
	"errors"
	"time"
)

// LiveSSOSession finds the usable SSO session whose token hashes to
// tokenHash: live at now, and of a person who still exists. ok false
// means there is none; err is only for a store problem. When the state
// holds no such session and catchUp is given, it is called once (a
// browser's steps spread over nodes may name a session another node
// opened a moment ago: catchUp waits for this node to reach the cluster's
// commit index) and, when it reports success, the session is looked for
// again. The authorization flow and the sign-in both find the browser's
// session through it.
func (s *State) LiveSSOSession(tokenHash string, now time.Time, catchUp func() bool) (SSOSession, User, bool, error) {
	sess, err := s.SSOSessionByToken(tokenHash)
	if errors.Is(err, ErrNotFound) && catchUp != nil && catchUp() {
		sess, err = s.SSOSessionByToken(tokenHash)
	}
	if errors.Is(err, ErrNotFound) || (err == nil && !sess.Live(now)) {
		return SSOSession{}, User{}, false, nil
	}
	if err != nil {
		return SSOSession{}, User{}, false, errors.New("sso session: " + err.Error())
	}
	u, err := s.User(sess.UserID)
	if errors.Is(err, ErrNotFound) {
		return SSOSession{}, User{}, false, nil
	}
	if err != nil {
		return SSOSession{}, User{}, false, errors.New("user: " + err.Error())
	}
	return sess, u, true, nil
}
