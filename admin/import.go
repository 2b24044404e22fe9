package admin

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/password"
)

// MaxImportBody caps the body of POST /users/import: fsm.MaxImportBatch
// people with long hashes and a full list of organizations fit.
const MaxImportBody = 4 << 20

// importBody is POST /users/import (docs/operators/import.md).
type importBody struct {
	Users []importUser `json:"users"`
}

type importUser struct {
	Email         string   `json:"email"`
	EmailVerified bool     `json:"email_verified"`
	Phone         string   `json:"phone"`
	PasswordHash  string   `json:"password_hash"`
	Organizations []string `json:"organizations"`
}

// importResult is the fate of one person of the request, in its order.
// Error is set when Status is "error": what is wrong, for the operator to
// fix in the file and send again.
type importResult struct {
	Index  int                  `json:"index"`
	Email  string               `json:"email"`
	Status string               `json:"status"`
	ID     string               `json:"id,omitempty"`
	Error  *httpx.EnvelopeError `json:"error,omitempty"`
}

// importAnswer is the 200 answer: every person's result and the counts.
type importAnswer struct {
	Data    []importResult `json:"data"`
	Created int            `json:"created"`
	Exists  int            `json:"exists"`
	Failed  int            `json:"failed"`
}

// importUsers is POST /users/import: up to fsm.MaxImportBatch people in
// one replicated write. A person whose fields are wrong (an unsupported
// hash, an address that is not one) gets an error of their own and does
// not stop the others; the request as a whole fails only when it is not a
// list of people, holds too many, or cannot be committed.
func (a *api) importUsers(w http.ResponseWriter, r *http.Request) {
	var b importBody
	if err := httpx.DecodeJSONLimit(w, r, &b, MaxImportBody); err != nil {
		httpx.WriteBodyError(w, r, err)
		return
	}
	switch {
	case len(b.Users) == 0:
		writeInvalid(w, r, []httpx.Detail{{Field: "users", Code: codeRequired, Message: "must hold at least one person"}})
		return
	case len(b.Users) > fsm.MaxImportBatch:
		writeInvalid(w, r, []httpx.Detail{{Field: "users", Code: codeTooMany,
			Message: "must hold at most " + strconv.Itoa(fsm.MaxImportBatch) + " people; send more in further requests"}})
		return
	}
	now := a.now()
	out := make([]importResult, len(b.Users))
	cmd := fsm.ImportUsers{At: now}
	var sent []int // index in b.Users of each person in cmd
	for i, u := range b.Users {
		out[i] = importResult{Index: i, Email: u.Email}
		iu, p := a.importedUser(u)
		if len(p) > 0 {
			out[i].Status = fsm.ImportFailed
			out[i].Error = importError(r, p)
			continue
		}
		cmd.Users = append(cmd.Users, iu)
		sent = append(sent, i)
	}
	if len(cmd.Users) > 0 {
		res, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeImportUsers, cmd))
		if !ok {
			return
		}
		outcomes, ok := res.Value.([]fsm.ImportOutcome)
		if !ok {
			outcomes = a.importOutcomesFromState(cmd)
		}
		for j, o := range outcomes {
			i := sent[j]
			out[i].Status, out[i].ID = o.Status, o.ID
			if o.Status == fsm.ImportFailed {
				out[i].Error = importError(r, problems{{Field: o.Field, Code: o.Code, Message: importCodeMessage(o.Code)}})
			}
		}
	}
	ans := importAnswer{Data: out}
	for _, o := range out {
		switch o.Status {
		case fsm.ImportCreated:
			ans.Created++
		case fsm.ImportExists:
			ans.Exists++
		default:
			ans.Failed++
		}
	}
	httpx.WriteJSON(w, http.StatusOK, ans)
}

// importedUser checks one person of the request and builds their part of
// the command, with fresh ids.
func (a *api) importedUser(u importUser) (fsm.ImportedUser, problems) {
	var p problems
	p.email("email", u.Email)
	p.phone("phone", u.Phone)
	if u.PasswordHash != "" {
		// The node's Hasher, whose caps (an argon2id at most 8 times its
		// own memory, 10 passes, 16 lanes) are the ones Verify applies.
		if err := a.Hasher.Check(u.PasswordHash); err != nil {
			code := codeInvalid
			if errors.Is(err, password.ErrUnsupported) {
				code = "unsupported"
			}
			p.add("password_hash", code, "%s", strings.TrimPrefix(err.Error(), "password: "))
		}
	}
	if len(u.Organizations) > maxOrganizations {
		p.add("organizations", codeTooMany, "must hold at most %d organizations", maxOrganizations)
	}
	iu := fsm.ImportedUser{User: fsm.User{ID: a.NewID(), Email: u.Email, EmailVerified: u.EmailVerified,
		Phone: u.Phone, PasswordHash: u.PasswordHash}}
	for k, org := range u.Organizations {
		id := p.uuid("organizations["+strconv.Itoa(k)+"]", org)
		iu.OrgIDs = append(iu.OrgIDs, id)
		iu.MembershipIDs = append(iu.MembershipIDs, a.NewID())
	}
	return iu, p
}

// importError is one person's error, in the envelope's shape.
func importError(r *http.Request, p problems) *httpx.EnvelopeError {
	e := httpx.NewEnvelope(r, httpx.CodeValidation, "this person was not imported", p...).Error
	if len(p) == 1 && p[0].Code == "conflict" {
		e.Code = httpx.CodeConflict
	}
	return &e
}

// importCodeMessage says what a failure code of the state machine means.
func importCodeMessage(code string) string {
	switch code {
	case "not_found":
		return "no such organization"
	case "duplicate":
		return "names the same organization twice"
	case "conflict":
		return "already in use by another person"
	}
	return "invalid"
}

// importOutcomesFromState rebuilds the outcomes of a committed import when
// its result is no longer held here (a forwarded write whose result ring
// moved on): a person whose address now belongs to the id the command gave
// them was created; to another id, they existed.
func (a *api) importOutcomesFromState(cmd fsm.ImportUsers) []fsm.ImportOutcome {
	out := make([]fsm.ImportOutcome, len(cmd.Users))
	for i, iu := range cmd.Users {
		u, err := a.State.UserByEmail(iu.User.Email)
		switch {
		case err != nil:
			out[i] = fsm.ImportOutcome{Status: fsm.ImportFailed, Field: "email", Code: "unknown"}
		case u.ID == iu.User.ID:
			out[i] = fsm.ImportOutcome{Status: fsm.ImportCreated, ID: u.ID}
		default:
			out[i] = fsm.ImportOutcome{Status: fsm.ImportExists, ID: u.ID}
		}
	}
	return out
}
