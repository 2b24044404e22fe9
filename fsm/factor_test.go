package fsm

import (
	"errors"
	"testing"
	"time"
)

func TestTOTPStepIsAcceptedOnce(t *testing.T) {
	h := newHarness(t)
	seed(h)
	if r := h.apply(TypeUseTOTP, UseTOTP{UserID: userA, Step: 5, At: t0}); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("use without enrolment: %v, want ErrNotFound", r.Err)
	}
	h.mustApply(TypeSetTOTP, SetTOTP{UserID: userA, Secret: []byte("sealed"), At: t0})
	for _, tc := range []struct {
		step int64
		want error
	}{
		{100, nil},
		{100, ErrReplay}, // the same code again
		{99, ErrReplay},  // an older code inside the skew window
		{101, nil},
	} {
		if r := h.apply(TypeUseTOTP, UseTOTP{UserID: userA, Step: tc.step, At: t0}); !errors.Is(r.Err, tc.want) {
			t.Fatalf("step %d: %v, want %v", tc.step, r.Err, tc.want)
		}
	}
	f, _ := h.f.State().Factors(userA)
	if !f.HasSecondFactor() || f.TOTP.LastStep != 101 {
		t.Fatalf("factors: %+v", f)
	}
	h.mustApply(TypeSetTOTP, SetTOTP{UserID: userA, At: t0}) // removal
	if f, _ := h.f.State().Factors(userA); f.HasSecondFactor() {
		t.Fatalf("after removal: %+v", f)
	}
}

func TestRecoveryCodesAreSingleUseAndReplaced(t *testing.T) {
	h := newHarness(t)
	seed(h)
	h.mustApply(TypeSetRecoveryCodes, SetRecoveryCodes{UserID: userA, Hashes: []string{"h1", "h2"}, At: t0})
	steps := []struct {
		hash string
		want error
	}{{"h1", nil}, {"h1", ErrWrongCode}, {"nope", ErrWrongCode}, {"h2", nil}}
	for _, s := range steps {
		if r := h.apply(TypeUseRecoveryCode, UseRecoveryCode{UserID: userA, Hash: s.hash, At: t0}); !errors.Is(r.Err, s.want) {
			t.Fatalf("use %s: %v, want %v", s.hash, r.Err, s.want)
		}
	}
	h.mustApply(TypeSetRecoveryCodes, SetRecoveryCodes{UserID: userA, Hashes: []string{"h3"}, At: t0})
	if r := h.apply(TypeUseRecoveryCode, UseRecoveryCode{UserID: userA, Hash: "h2", At: t0}); !errors.Is(r.Err, ErrWrongCode) {
		t.Fatalf("old code after replacement: %v", r.Err)
	}
	f, _ := h.f.State().Factors(userA)
	if f.RecoveryLeft() != 1 || f.HasSecondFactor() {
		t.Fatalf("recovery codes must not count as a second factor: %+v", f)
	}
}

func TestPasskeyCounterAndUniqueness(t *testing.T) {
	h := newHarness(t)
	seed(h)
	pk := Passkey{ID: []byte{1, 2, 3}, Credential: []byte(`{}`), SignCount: 4, CreatedAt: t0}
	h.mustApply(TypeAddPasskey, AddPasskey{UserID: userA, Passkey: pk})
	if r := h.apply(TypeAddPasskey, AddPasskey{UserID: userB, Passkey: pk}); !errors.Is(r.Err, ErrConflict) {
		t.Fatalf("same credential for another person: %v, want conflict", r.Err)
	}
	for _, tc := range []struct {
		count uint32
		want  error
	}{{5, nil}, {5, ErrReplay}, {3, ErrReplay}, {9, nil}} {
		if r := h.apply(TypeUsePasskey, UsePasskey{UserID: userA, ID: pk.ID, SignCount: tc.count, At: t0}); !errors.Is(r.Err, tc.want) {
			t.Fatalf("count %d: %v, want %v", tc.count, r.Err, tc.want)
		}
	}
	// An authenticator without a counter (always 0) is accepted each time.
	zero := Passkey{ID: []byte{9}, Credential: []byte(`{}`), CreatedAt: t0}
	h.mustApply(TypeAddPasskey, AddPasskey{UserID: userA, Passkey: zero})
	for range 2 {
		if r := h.apply(TypeUsePasskey, UsePasskey{UserID: userA, ID: zero.ID, At: t0}); r.Err != nil {
			t.Fatalf("counterless authenticator: %v", r.Err)
		}
	}
	h.mustApply(TypeRemovePasskey, RemovePasskey{UserID: userA, ID: pk.ID})
	h.mustApply(TypeAddPasskey, AddPasskey{UserID: userB, Passkey: pk}) // the id is free again
	h.mustApply(TypeDeleteUser, DeleteUser{ID: userB, At: t0})
	h.mustApply(TypeAddPasskey, AddPasskey{UserID: userA, Passkey: pk}) // erasure freed it too
}

func TestChallengeIsTakenOnce(t *testing.T) {
	h := newHarness(t)
	seed(h)
	ch := Challenge{ID: "c1", UserID: userA, Purpose: "assert", Data: []byte(`{"x":1}`), ExpiresAt: t0.Add(time.Minute)}
	h.mustApply(TypePutChallenge, PutChallenge{Challenge: ch})
	take := func(id, user, purpose string, at time.Time) Result {
		return h.apply(TypeTakeChallenge, TakeChallenge{ID: id, UserID: user, Purpose: purpose, At: at})
	}
	if r := take("c1", userB, "assert", t0); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("foreign take: %v", r.Err)
	}
	if r := take("c1", userA, "assert", t0); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("a foreign try must burn the challenge: %v", r.Err)
	}
	ch.ID = "c2"
	h.mustApply(TypePutChallenge, PutChallenge{Challenge: ch})
	if r := take("c2", userA, "assert", t0.Add(time.Minute)); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("expired take: %v", r.Err)
	}
	ch.ID = "c3"
	h.mustApply(TypePutChallenge, PutChallenge{Challenge: ch})
	r := take("c3", userA, "assert", t0)
	if got, ok := r.Value.(Challenge); r.Err != nil || !ok || string(got.Data) != `{"x":1}` {
		t.Fatalf("take: %+v", r)
	}
	if r := take("c3", userA, "assert", t0); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("second take: %v", r.Err)
	}
}

func TestSMSCodeAttemptsAndExpiry(t *testing.T) {
	h := newHarness(t)
	seed(h)
	issueCode := func(id, user string) {
		h.mustApply(TypeIssueSMSCode, IssueSMSCode{Code: SMSCode{ID: id, UserID: user, Phone: "+15550001", Hash: "good", ExpiresAt: t0.Add(5 * time.Minute)}})
	}
	check := func(id, hash string, at time.Time) error {
		return h.apply(TypeCheckSMSCode, CheckSMSCode{ID: id, Hash: hash, MaxAttempts: 3, At: at}).Err
	}
	issueCode("s1", userA)
	for i, want := range []error{ErrWrongCode, ErrWrongCode, ErrWrongCode, ErrNotFound} {
		if err := check("s1", "bad", t0); !errors.Is(err, want) {
			t.Fatalf("wrong guess %d: %v, want %v", i+1, err, want)
		}
	}
	issueCode("s2", userA)
	if err := check("s2", "good", t0.Add(5*time.Minute)); !errors.Is(err, ErrExpired) {
		t.Fatalf("expired: %v", err)
	}
	issueCode("s3", "") // a number that belongs to nobody
	if err := check("s3", "good", t0); !errors.Is(err, ErrWrongCode) {
		t.Fatalf("unknown number: %v", err)
	}
	issueCode("s4", userA)
	if err := check("s4", "good", t0); err != nil {
		t.Fatalf("right code: %v", err)
	}
	if err := check("s4", "good", t0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("reuse: %v", err)
	}
}

func TestThrottleLocksAndEndsByItself(t *testing.T) {
	h := newHarness(t)
	rule := ThrottleRule{Key: "acct:x", Limit: 3, Window: time.Minute, Lockout: 10 * time.Minute}
	hit := func(at time.Time) Throttle {
		return h.mustApply(TypeThrottleHit, ThrottleHit{Rules: []ThrottleRule{rule}, At: at}).Value.([]Throttle)[0]
	}
	steps := []struct {
		at     time.Duration
		locked bool
		count  int
	}{
		{0, false, 1},
		{10 * time.Second, false, 2},
		{2 * time.Minute, false, 1}, // the window passed: counting starts again
		{2*time.Minute + time.Second, false, 2},
		{2*time.Minute + 2*time.Second, true, 3},
		{5 * time.Minute, true, 4}, // still locked; counting goes on
	}
	for i, s := range steps {
		got := hit(t0.Add(s.at))
		if got.Locked(t0.Add(s.at)) != s.locked || got.Count != s.count {
			t.Fatalf("step %d: %+v, want locked=%v count=%d", i, got, s.locked, s.count)
		}
	}
	end := t0.Add(2*time.Minute + 2*time.Second + 10*time.Minute)
	if th, _ := h.f.State().Throttle("acct:x"); th.Locked(end) || !th.Locked(end.Add(-time.Second)) {
		t.Fatalf("lock must end at %v: %+v", end, th)
	}
	if l, _ := h.f.State().Throttles(t0.Add(5 * time.Minute)); len(l) != 1 {
		t.Fatalf("locked list: %+v", l)
	}
	h.mustApply(TypeThrottleClear, ThrottleClear{Keys: []string{"acct:x"}})
	if th, _ := h.f.State().Throttle("acct:x"); th.Count != 0 || th.Locked(t0.Add(5*time.Minute)) {
		t.Fatalf("cleared: %+v", th)
	}
	hit(t0)
	st := h.mustApply(TypeReap, Reap{Before: t0.Add(time.Hour)}).Value.(ReapStats)
	if st.Throttles != 1 {
		t.Fatalf("reap: %+v", st)
	}
}

func TestStepUpKeepsTheSession(t *testing.T) {
	h := signedIn(t)
	at := t0.Add(time.Minute)
	s := h.mustApply(TypeStepUpSSOSession, StepUpSSOSession{ID: "sso1", Method: "otp", ACR: "mfa", At: at}).Value.(SSOSession)
	if s.ID != "sso1" || s.ACR != "mfa" || !s.AuthTime.Equal(at) || len(s.AMR) != 2 || s.AMR[1] != "otp" {
		t.Fatalf("stepped up: %+v", s)
	}
	if !s.Verified["otp"].Equal(at) {
		t.Fatalf("verified: got %v, want otp at %v", s.Verified, at)
	}
	later := at.Add(time.Minute)
	s = h.mustApply(TypeStepUpSSOSession, StepUpSSOSession{ID: "sso1", Method: "otp", ACR: "mfa", At: later}).Value.(SSOSession)
	if !s.Verified["otp"].Equal(later) {
		t.Fatalf("a second verification moves its time: got %v, want %v", s.Verified["otp"], later)
	}
	if len(s.AMR) != 2 {
		t.Fatalf("a method appears once in amr: %v", s.AMR)
	}
	if r := h.apply(TypeStepUpSSOSession, StepUpSSOSession{ID: "sso1", Method: "otp", ACR: "mfa", At: t0.Add(9 * time.Hour)}); !errors.Is(r.Err, ErrSessionEnded) {
		t.Fatalf("expired session: %v", r.Err)
	}
}

// TestThrottleReserveChecksAndCountsInOneApply: a reservation refuses,
// counting nothing, while any of its keys is locked; otherwise it counts
// every key, and the one that reaches the limit locks (that attempt is
// still let through). A success settles: Keys forgotten, Release given
// back one attempt (which lifts the lock the limit set), Prefixes
// forgotten wholesale; a session command
// carries the settlement in its own apply.
func TestThrottleReserveChecksAndCountsInOneApply(t *testing.T) {
	h := signedIn(t)
	acct := ThrottleRule{Key: "pwd:a@1", Limit: 3, Window: time.Minute, Lockout: 10 * time.Minute}
	ip := ThrottleRule{Key: "ip:1", Limit: 50, Window: time.Minute, Lockout: 10 * time.Minute}
	reserve := func(at time.Time) Result {
		return h.apply(TypeThrottleReserve, ThrottleReserve{Rules: []ThrottleRule{acct, ip}, At: at})
	}
	for i := 1; i <= 3; i++ {
		r := reserve(t0)
		if r.Err != nil || r.Value.([]Throttle)[0].Count != i {
			t.Fatalf("reservation %d: %v %+v", i, r.Err, r.Value)
		}
	}
	for range 5 {
		if r := reserve(t0.Add(time.Second)); !errors.Is(r.Err, ErrLocked) {
			t.Fatalf("past the limit: got %v, want ErrLocked", r.Err)
		}
	}
	if th, _ := h.f.State().Throttle("ip:1"); th.Count != 3 {
		t.Fatalf("refused reservations were counted: ip count %d, want 3", th.Count)
	}
	// A success settles through the session write.
	h.mustApply(TypeStepUpSSOSession, StepUpSSOSession{ID: "sso1", Method: "otp", ACR: "mfa", At: t0.Add(time.Second),
		Settle: &ThrottleClear{Keys: []string{"pwd:a@1"}, Release: []string{"ip:1"}}})
	if th, _ := h.f.State().Throttle("pwd:a@1"); th.Count != 0 {
		t.Fatalf("settled key: %+v", th)
	}
	if th, _ := h.f.State().Throttle("ip:1"); th.Count != 2 {
		t.Fatalf("released key: count %d, want 2", th.Count)
	}
	// In-flight attempts that fill a key lock it; the first that succeeds
	// gives one back and lifts the lock.
	busy := ThrottleRule{Key: "ip:2", Limit: 3, Window: time.Minute, Lockout: 10 * time.Minute}
	for range 3 {
		h.mustApply(TypeThrottleReserve, ThrottleReserve{Rules: []ThrottleRule{busy}, At: t0})
	}
	if r := h.apply(TypeThrottleReserve, ThrottleReserve{Rules: []ThrottleRule{busy}, At: t0}); !errors.Is(r.Err, ErrLocked) {
		t.Fatalf("a full key: got %v, want ErrLocked", r.Err)
	}
	h.mustApply(TypeThrottleClear, ThrottleClear{Release: []string{"ip:2"}})
	if th, _ := h.f.State().Throttle("ip:2"); th.Count != 2 || th.Locked(t0) {
		t.Fatalf("after a release: %+v, want count 2 and no lock", th)
	}
	if r := h.apply(TypeThrottleReserve, ThrottleReserve{Rules: []ThrottleRule{busy}, At: t0}); r.Err != nil {
		t.Fatalf("a reservation after the release: %v", r.Err)
	}
	reserve(t0.Add(2 * time.Second))
	h.mustApply(TypeThrottleReserve, ThrottleReserve{Rules: []ThrottleRule{{Key: "pwd:a", Limit: 9, Window: time.Minute}}, At: t0})
	if n := h.mustApply(TypeThrottleClear, ThrottleClear{Prefixes: []string{"pwd:a"}}).Value.(int); n != 2 {
		t.Fatalf("prefix clear forgot %d keys, want 2", n)
	}
	if r := h.apply(TypeThrottleReserve, ThrottleReserve{At: t0}); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("no rules: got %v, want ErrInvalid", r.Err)
	}
}
