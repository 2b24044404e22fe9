package node_test

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file holds the history that TestChaos records and the checker that
// judges it. The checker is a pure function of the history so that it can
// be tested on hand-written histories (TestChaosCheckerFindsViolations):
// a checker that cannot fail proves nothing.

// chaosOutcome is what the client learnt from one operation.
type chaosOutcome int

const (
	chaosOK      chaosOutcome = iota // acknowledged (2xx, or the expected redirect)
	chaosFail                        // definite failure: a 4xx, nothing happened
	chaosUnknown                     // indeterminate: timeout, 5xx, connection error
)

func (o chaosOutcome) String() string {
	return [...]string{"ok", "fail", "unknown"}[o]
}

// chaosClassify maps an HTTP answer to an outcome: a transport error or a
// 5xx may or may not have taken effect, a 4xx did not.
func chaosClassify(status int, err error) chaosOutcome {
	switch {
	case err != nil || status >= 500 || status == 0:
		return chaosUnknown
	case status >= 400:
		return chaosFail
	default:
		return chaosOK
	}
}

// chaosKind names an operation of the workload.
type chaosKind string

const (
	opSignIn     chaosKind = "signin"     // browser flow up to the callback with a code
	opExchange   chaosKind = "exchange"   // POST /oauth2/token
	opRevoke     chaosKind = "revoke"     // POST /oauth2/revoke of an access token
	opLogout     chaosKind = "logout"     // GET /logout with the browser that signed in
	opUserinfo   chaosKind = "userinfo"   // GET /userinfo
	opIntrospect chaosKind = "introspect" // POST /oauth2/introspect
	opCreateOrg  chaosKind = "create-org" // POST /admin/v1/organizations
)

// chaosOp is one operation with its timing and outcome. Ids (Code, Token,
// Session) start at 1; 0 means none.
type chaosOp struct {
	Kind       chaosKind
	Worker     int
	Node       int // -1: through the load balancer
	Start, End time.Time
	Outcome    chaosOutcome
	Status     int
	Err        string // transport error, or the OAuth error code of a 4xx
	Code       int    // the authorization code (signin, exchange)
	Token      int    // the access token (exchange ok, revoke, checks)
	Session    int    // the browser's SSO session (signin, logout)
	Active     bool   // checks: the node reported the token active
	Double     bool   // exchange: one of two concurrent exchanges of the code
	Slug       string // create-org
	OrgID      string // create-org, when acknowledged
	Final      bool   // made by the checks after the heal
}

// chaosToken is an access token that an exchange returned.
type chaosToken struct {
	ID       int
	Raw      string
	IDToken  string
	Code     int
	Session  int
	IssuedAt time.Time
}

// chaosFault is one fault the nemesis injected or undid.
type chaosFault struct {
	At   time.Time
	What string
}

// chaosHistory is everything the run did, appended by every goroutine.
type chaosHistory struct {
	t0 time.Time

	mu       sync.Mutex
	ops      []chaosOp
	faults   []chaosFault
	tokens   []chaosToken // tokens[id-1]
	codes    int
	sessions int
}

func newChaosHistory() *chaosHistory { return &chaosHistory{t0: time.Now()} }

func (h *chaosHistory) record(op chaosOp) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

func (h *chaosHistory) fault(what string) {
	h.mu.Lock()
	h.faults = append(h.faults, chaosFault{At: time.Now(), What: what})
	h.mu.Unlock()
}

func (h *chaosHistory) newCode() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.codes++
	return h.codes
}

func (h *chaosHistory) newSession() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sessions++
	return h.sessions
}

func (h *chaosHistory) addToken(tok chaosToken) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	tok.ID = len(h.tokens) + 1
	h.tokens = append(h.tokens, tok)
	return tok.ID
}

// snapshot returns copies of the ops, faults and tokens recorded so far.
func (h *chaosHistory) snapshot() ([]chaosOp, []chaosFault, []chaosToken) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]chaosOp(nil), h.ops...), append([]chaosFault(nil), h.faults...), append([]chaosToken(nil), h.tokens...)
}

// rel is t as an offset from the start of the run.
func (h *chaosHistory) rel(t time.Time) string {
	return fmt.Sprintf("%.3fs", t.Sub(h.t0).Seconds())
}

func (h *chaosHistory) describe(op chaosOp) string {
	node := fmt.Sprintf("node %d", op.Node)
	if op.Node < 0 {
		node = "the balancer"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %s by worker %d [%s, %s]: %s", op.Kind, node, op.Worker, h.rel(op.Start), h.rel(op.End), op.Outcome)
	if op.Status != 0 {
		fmt.Fprintf(&b, " %d", op.Status)
	}
	if op.Err != "" {
		fmt.Fprintf(&b, " (%s)", op.Err)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"code", op.Code}, {"token", op.Token}, {"session", op.Session}} {
		if f.v != 0 {
			fmt.Fprintf(&b, " %s#%d", f.name, f.v)
		}
	}
	if op.Kind == opUserinfo || op.Kind == opIntrospect {
		fmt.Fprintf(&b, " active=%v", op.Active)
	}
	if op.Double {
		b.WriteString(" (one of two concurrent exchanges)")
	}
	if op.Slug != "" {
		fmt.Fprintf(&b, " slug=%s", op.Slug)
	}
	if op.Final {
		b.WriteString(" [final]")
	}
	return b.String()
}

// chaosViolation is one broken guarantee, with the operations that show it.
type chaosViolation struct {
	What string
	Op   chaosOp // the offending operation
	// Related selects the history excerpt printed with the violation.
	Code, Token, Session int
}

// chaosCheck judges a history:
//
//   - no code redeemed twice: at most one exchange of a code returned 200;
//   - no acknowledged code issuance lost: a code handed to the browser is
//     not refused by every exchange (all of them definite 4xx failures);
//   - no token reported active after its end was acknowledged: a userinfo
//     or introspection call that started after a revocation of the token
//     (200), a logout of its session (302 to the redirect URI) or a replay
//     of its code (400 invalid_grant; a replay revokes the first token) had
//     answered did not report it active.
//
// Organizations (acknowledged writes on every node) are checked against
// the nodes' state, outside this function.
func chaosCheck(ops []chaosOp, tokens []chaosToken) []chaosViolation {
	var out []chaosViolation
	exchanges := map[int][]chaosOp{} // code -> exchanges
	for _, op := range ops {
		if op.Kind == opExchange {
			exchanges[op.Code] = append(exchanges[op.Code], op)
		}
	}
	codes := make([]int, 0, len(exchanges))
	for code := range exchanges {
		codes = append(codes, code)
	}
	sort.Ints(codes)

	for _, code := range codes {
		var won []chaosOp
		refused := 0
		for _, op := range exchanges[code] {
			switch op.Outcome {
			case chaosOK:
				won = append(won, op)
			case chaosFail:
				refused++
			}
		}
		if len(won) > 1 {
			out = append(out, chaosViolation{What: "code redeemed twice", Op: won[1], Code: code})
		}
		if refused == len(exchanges[code]) {
			out = append(out, chaosViolation{What: "an issued code was refused by every exchange (acknowledged issuance lost?)",
				Op: exchanges[code][0], Code: code})
		}
	}
	endAt := chaosEnds(ops, tokens)
	for _, op := range ops {
		if (op.Kind != opUserinfo && op.Kind != opIntrospect) || !op.Active {
			continue
		}
		if at, ok := endAt[op.Token]; ok && op.Start.After(at) {
			tok := tokens[op.Token-1]
			out = append(out, chaosViolation{What: fmt.Sprintf("token reported active %v after its end was acknowledged", op.Start.Sub(at).Round(time.Millisecond)),
				Op: op, Token: op.Token, Code: tok.Code, Session: tok.Session})
		}
	}
	return out
}

// chaosTokenIndex returns the tokens of each session and, for each code,
// the token of its successful exchange.
func chaosTokenIndex(ops []chaosOp, tokens []chaosToken) (bySession map[int][]int, winner map[int]int) {
	bySession, winner = map[int][]int{}, map[int]int{}
	for _, tok := range tokens {
		bySession[tok.Session] = append(bySession[tok.Session], tok.ID)
	}
	for _, op := range ops {
		if op.Kind == opExchange && op.Outcome == chaosOK {
			winner[op.Code] = op.Token
		}
	}
	return bySession, winner
}

// chaosEnds returns, for each token whose end was acknowledged, when it
// first was: a revocation answered 200, a logout of its session answered
// with the redirect, or a replay of its code refused with invalid_grant
// (the replay revokes the token of the first exchange;
// given that another exchange of the code won, a replay's invalid_grant
// can only mean that the replay was applied after it).
func chaosEnds(ops []chaosOp, tokens []chaosToken) map[int]time.Time {
	endAt := map[int]time.Time{}
	ended := func(token int, at time.Time) {
		if prev, ok := endAt[token]; token != 0 && (!ok || at.Before(prev)) {
			endAt[token] = at
		}
	}
	bySession, winner := chaosTokenIndex(ops, tokens)
	for _, op := range ops {
		switch {
		case op.Outcome == chaosOK && op.Kind == opRevoke:
			ended(op.Token, op.End)
		case op.Outcome == chaosOK && op.Kind == opLogout:
			for _, tok := range bySession[op.Session] {
				ended(tok, op.End)
			}
		case op.Outcome == chaosFail && op.Kind == opExchange && op.Err == "invalid_grant":
			ended(winner[op.Code], op.End)
		}
	}
	return endAt
}

// excerpt is the part of the history around a violation: every operation
// on its code, token or session (and on the session's other tokens), and
// every fault from 10 s before the first of them.
func (h *chaosHistory) excerpt(v chaosViolation, ops []chaosOp, faults []chaosFault, tokens []chaosToken) string {
	related := map[int]bool{v.Token: true}
	for _, tok := range tokens {
		if (v.Session != 0 && tok.Session == v.Session) || (v.Code != 0 && tok.Code == v.Code) {
			related[tok.ID] = true
		}
	}
	var lines []string
	var first time.Time
	for _, op := range ops {
		if (v.Code != 0 && op.Code == v.Code) || (op.Token != 0 && related[op.Token]) || (v.Session != 0 && op.Session == v.Session) {
			lines = append(lines, "  "+h.describe(op))
			if first.IsZero() || op.Start.Before(first) {
				first = op.Start
			}
		}
	}
	for _, f := range faults {
		if !first.IsZero() && f.At.After(first.Add(-10*time.Second)) && f.At.Before(v.Op.End.Add(time.Second)) {
			lines = append(lines, fmt.Sprintf("  fault at %s: %s", h.rel(f.At), f.What))
		}
	}
	return strings.Join(lines, "\n")
}

// TestChaosCheckerFindsViolations feeds the checker hand-written histories,
// each breaking one guarantee, and one clean history.
func TestChaosCheckerFindsViolations(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	op := func(kind chaosKind, start, end int, outcome chaosOutcome, f func(*chaosOp)) chaosOp {
		o := chaosOp{Kind: kind, Start: at(start), End: at(end), Outcome: outcome}
		if f != nil {
			f(&o)
		}
		return o
	}
	tokens := []chaosToken{{ID: 1, Code: 1, Session: 1}, {ID: 2, Code: 2, Session: 1}}
	exchanged := []chaosOp{
		op(opExchange, 0, 10, chaosOK, func(o *chaosOp) { o.Code, o.Token = 1, 1 }),
		op(opExchange, 20, 30, chaosOK, func(o *chaosOp) { o.Code, o.Token = 2, 2 }),
	}
	for _, tt := range []struct {
		name string
		ops  []chaosOp
		want string // "" for no violation
	}{
		{"clean", []chaosOp{
			op(opUserinfo, 40, 50, chaosOK, func(o *chaosOp) { o.Token, o.Active = 1, true }),
			op(opRevoke, 60, 70, chaosOK, func(o *chaosOp) { o.Token = 1 }),
			op(opUserinfo, 65, 80, chaosOK, func(o *chaosOp) { o.Token, o.Active = 1, true }), // started before the ack
			op(opUserinfo, 71, 80, chaosUnknown, func(o *chaosOp) { o.Token = 1 }),
			op(opRevoke, 80, 90, chaosUnknown, func(o *chaosOp) { o.Token = 2 }),
			op(opUserinfo, 100, 110, chaosOK, func(o *chaosOp) { o.Token, o.Active = 2, true }), // revocation not acknowledged
		}, ""},
		{"active after revocation", []chaosOp{
			op(opRevoke, 60, 70, chaosOK, func(o *chaosOp) { o.Token = 1 }),
			op(opIntrospect, 71, 80, chaosOK, func(o *chaosOp) { o.Token, o.Active = 1, true }),
		}, "token reported active"},
		{"active after logout", []chaosOp{
			op(opLogout, 60, 70, chaosOK, func(o *chaosOp) { o.Session = 1 }),
			op(opUserinfo, 71, 80, chaosOK, func(o *chaosOp) { o.Token, o.Active = 2, true }),
		}, "token reported active"},
		{"active after replay", []chaosOp{
			op(opExchange, 60, 70, chaosFail, func(o *chaosOp) { o.Code, o.Err, o.Status = 1, "invalid_grant", 400 }),
			op(opUserinfo, 71, 80, chaosOK, func(o *chaosOp) { o.Token, o.Active = 1, true }),
		}, "token reported active"},
		{"redeemed twice", []chaosOp{
			op(opExchange, 0, 12, chaosOK, func(o *chaosOp) { o.Code = 1 }),
		}, "code redeemed twice"},
		{"issued code lost", []chaosOp{
			op(opExchange, 0, 12, chaosFail, func(o *chaosOp) { o.Code, o.Status, o.Err = 3, 400, "invalid_grant" }),
		}, "refused by every exchange"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := chaosCheck(append(append([]chaosOp(nil), exchanged...), tt.ops...), tokens)
			switch {
			case tt.want == "" && len(got) != 0:
				t.Fatalf("got %d violations (first %q), want none", len(got), got[0].What)
			case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0].What, tt.want)):
				t.Fatalf("got %+v, want one violation %q", got, tt.want)
			}
		})
	}
}
