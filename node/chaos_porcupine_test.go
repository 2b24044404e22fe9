package node_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The chaos history checked for linearizability by porcupine, against
// models of what the service promises (issue 15):
//
//   - codes: a code is redeemed at most once. An exchange that returns
//     tokens needs the code unredeemed and redeems it; one refused with
//     invalid_grant needs it redeemed already (the code was issued: the
//     browser holds it); an exchange whose outcome is unknown may or may
//     not have redeemed it.
//   - tokens: a token's liveness is a register that revocation, logout and a
//     code replay (which revokes the first exchange's token) write, and that
//     userinfo and introspection read. A read that reports the token active
//     needs it not ended. (A read reporting it inactive is allowed whenever:
//     a fresh sign-in in the same browser supersedes the session, which the
//     model does not track.)
//   - orgs: admin writes are linearizable: creating an organization with
//     a slug needs the slug free and takes it; a refusal needs it taken.
//
// An operation that failed without a definite answer (a timeout, a 5xx,
// a cut connection) is an "info" operation in Jepsen's sense: it may take
// effect at any time after its call, so its return is set past the end of
// the history.

// pcInput is an operation's input: its kind and the partition it belongs
// to (a code, a token, a slug).
type pcInput struct {
	Kind chaosKind
	Key  string
}

// Outputs of pcOp.
const (
	pcOK       = "ok"       // took effect (a write), or returned tokens (exchange)
	pcRefused  = "refused"  // a definite refusal that changes nothing (invalid_grant; 409)
	pcNoEffect = "noop"     // a definite failure that changes nothing and says nothing
	pcUnknown  = "unknown"  // no definite answer
	pcActive   = "active"   // a read: the token is live
	pcInactive = "inactive" // a read: the token is not live
)

func pcStates(vs ...bool) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

// pcModel is a one-bit register per partition: the code redeemed, the
// token ended, the slug taken. Reads (pcActive, pcInactive) are only on
// tokens.
var pcModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(pcInput).Key
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() []any { return pcStates(false) },
	Step: func(state, input, output any) []any {
		set := state.(bool)
		in := input.(pcInput)
		switch output.(string) {
		case pcOK:
			if in.Kind == opExchange || in.Kind == opCreateOrg {
				if set {
					return nil // redeemed twice; a slug taken twice
				}
			}
			return pcStates(true)
		case pcRefused:
			if !set {
				return nil // refused although nothing took it before
			}
			return pcStates(true)
		case pcUnknown:
			return pcStates(set, true)
		case pcActive:
			if set {
				return nil // reported live after its end
			}
			return pcStates(false)
		}
		return pcStates(set) // pcNoEffect, pcInactive
	},
	DescribeOperation: func(input, output any) string {
		return fmt.Sprintf("%s %s -> %s", input.(pcInput).Kind, input.(pcInput).Key, output)
	},
	DescribeState: func(state any) string {
		if state.(bool) {
			return "taken / ended"
		}
		return "free / live"
	},
}

// pcHistory turns the chaos history into porcupine operations.
func pcHistory(ops []chaosOp, tokens []chaosToken) []porcupine.Operation {
	var end time.Time
	for _, op := range ops {
		if op.End.After(end) {
			end = op.End
		}
	}
	never := end.Add(time.Hour).UnixNano() // an info operation's return
	bySession, winner := chaosTokenIndex(ops, tokens)
	var out []porcupine.Operation
	add := func(op chaosOp, key, output string) {
		ret := op.End.UnixNano()
		if output == pcUnknown {
			ret = never
		}
		out = append(out, porcupine.Operation{ClientId: op.Worker, Input: pcInput{Kind: op.Kind, Key: key},
			Call: op.Start.UnixNano(), Output: output, Return: ret})
	}
	for _, op := range ops {
		switch op.Kind {
		case opExchange:
			code := fmt.Sprintf("code/%d", op.Code)
			switch {
			case op.Outcome == chaosOK:
				add(op, code, pcOK)
			case op.Outcome == chaosFail && op.Err == "invalid_grant":
				add(op, code, pcRefused)
				if tok := winner[op.Code]; tok != 0 {
					add(op, fmt.Sprintf("token/%d", tok), pcOK) // the replay revoked it
				}
			case op.Outcome == chaosFail:
				add(op, code, pcNoEffect)
			default:
				add(op, code, pcUnknown)
				if tok := winner[op.Code]; tok != 0 {
					add(op, fmt.Sprintf("token/%d", tok), pcUnknown)
				}
			}
		case opRevoke, opLogout:
			ids := []int{op.Token}
			if op.Kind == opLogout {
				ids = bySession[op.Session]
			}
			out2 := map[chaosOutcome]string{chaosOK: pcOK, chaosFail: pcNoEffect, chaosUnknown: pcUnknown}[op.Outcome]
			for _, id := range ids {
				if id != 0 {
					add(op, fmt.Sprintf("token/%d", id), out2)
				}
			}
		case opUserinfo, opIntrospect:
			if op.Outcome != chaosOK || op.Token == 0 {
				continue // no definite reading
			}
			if op.Active {
				add(op, fmt.Sprintf("token/%d", op.Token), pcActive)
			} else {
				add(op, fmt.Sprintf("token/%d", op.Token), pcInactive)
			}
		case opCreateOrg:
			out2 := map[chaosOutcome]string{chaosOK: pcOK, chaosUnknown: pcUnknown}[op.Outcome]
			if op.Outcome == chaosFail {
				out2 = pcNoEffect
				if op.Status == 409 {
					out2 = pcRefused
				}
			}
			add(op, "org/"+op.Slug, out2)
		}
	}
	return out
}

// chaosLinearizable checks the history with porcupine; on a violation it
// writes porcupine's visualization and the history next to each other
// and reports where. It returns the number of operations checked.
func chaosLinearizable(t *testing.T, ops []chaosOp, tokens []chaosToken, seed uint64, size int) int {
	t.Helper()
	history := pcHistory(ops, tokens)
	model := pcModel.ToModel()
	res, info := porcupine.CheckOperationsVerbose(model, history, 2*time.Minute)
	switch res {
	case porcupine.Ok:
	case porcupine.Unknown:
		t.Logf("porcupine: the check timed out after 2 minutes on %d operations (seed %d): not judged", len(history), seed)
	default:
		dir := os.Getenv("OIDCD_CHAOS_OUT")
		if dir == "" {
			dir = os.TempDir()
		}
		base := filepath.Join(dir, fmt.Sprintf("oidcd-chaos-%d-nodes%d", seed, size))
		if err := porcupine.VisualizePath(model, info, base+".html"); err != nil {
			t.Logf("porcupine visualization: %v", err)
		}
		if b, err := json.MarshalIndent(ops, "", " "); err == nil {
			os.WriteFile(base+".history.json", b, 0o644)
		}
		t.Errorf("porcupine: the history is not linearizable (seed %d); see %s.html and %s.history.json", seed, base, base)
	}
	return len(history)
}

// TestPorcupineModel: the model refuses what the service must never do
// and accepts what faults may leave unknown.
func TestPorcupineModel(t *testing.T) {
	t0 := time.Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	op := func(kind chaosKind, start, end int, outcome chaosOutcome, f func(*chaosOp)) chaosOp {
		o := chaosOp{Kind: kind, Start: at(start), End: at(end), Outcome: outcome, Status: 200}
		if f != nil {
			f(&o)
		}
		return o
	}
	code1 := func(o *chaosOp) { o.Code = 1 }
	won := func(o *chaosOp) { o.Code, o.Token = 1, 1 }
	tok1 := func(o *chaosOp) { o.Token = 1 }
	active := func(o *chaosOp) { o.Token, o.Active = 1, true }
	replay := func(o *chaosOp) { o.Code, o.Err, o.Status = 1, "invalid_grant", 400 }
	tokens := []chaosToken{{ID: 1, Code: 1, Session: 1}}
	for _, tc := range []struct {
		name string
		ops  []chaosOp
		ok   bool
	}{
		{"a code redeemed, replayed, the token checked before", []chaosOp{op(opExchange, 0, 1, chaosOK, won), op(opIntrospect, 2, 3, chaosOK, active), op(opExchange, 4, 5, chaosFail, replay)}, true},
		{"a code redeemed twice", []chaosOp{op(opExchange, 0, 1, chaosOK, won), op(opExchange, 2, 3, chaosOK, code1)}, false},
		{"concurrent exchanges, one unknown", []chaosOp{op(opExchange, 0, 3, chaosOK, won), op(opExchange, 1, 2, chaosUnknown, code1)}, true},
		{"a refusal before any redemption", []chaosOp{op(opExchange, 0, 1, chaosFail, replay), op(opExchange, 2, 3, chaosOK, won)}, false},
		{"active after the revocation answered", []chaosOp{op(opRevoke, 0, 1, chaosOK, tok1), op(opUserinfo, 2, 3, chaosOK, active)}, false},
		{"active during the revocation", []chaosOp{op(opRevoke, 0, 3, chaosOK, tok1), op(opUserinfo, 1, 2, chaosOK, active)}, true},
		{"active after an unknown revocation", []chaosOp{op(opRevoke, 0, 1, chaosUnknown, tok1), op(opUserinfo, 2, 3, chaosOK, active)}, true},
		{"active after the logout answered", []chaosOp{op(opLogout, 0, 1, chaosOK, func(o *chaosOp) { o.Session = 1 }), op(opIntrospect, 2, 3, chaosOK, active)}, false},
		{"active after a replay was refused", []chaosOp{op(opExchange, 0, 1, chaosOK, won), op(opExchange, 2, 3, chaosFail, replay), op(opIntrospect, 4, 5, chaosOK, active)}, false},
		{"an org slug taken twice", []chaosOp{op(opCreateOrg, 0, 1, chaosOK, func(o *chaosOp) { o.Slug = "a" }), op(opCreateOrg, 2, 3, chaosOK, func(o *chaosOp) { o.Slug = "a" })}, false},
	} {
		res := porcupine.CheckOperations(pcModel.ToModel(), pcHistory(tc.ops, tokens))
		if res != tc.ok {
			t.Errorf("%s: linearizable %v, want %v", tc.name, res, tc.ok)
		}
	}
}
