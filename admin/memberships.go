package admin

import (
	"errors"
	"net/http"
	"slices"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// Membership ties a user to an organization.
type Membership struct {
	ID     string `json:"id"`
	UserID string `json:"user_id"`
	OrgID  string `json:"org_id"`
	Status string `json:"status"`
	// DirectoryID: granted by that directory's group mapping (and taken
	// back by its sync); absent for one an operator created.
	DirectoryID string `json:"directory_id,omitempty"`
}

func membershipOut(m fsm.Membership) Membership {
	return Membership{ID: m.ID, UserID: m.UserID, OrgID: m.OrgID, Status: m.Status, DirectoryID: m.DirectoryID}
}

type membershipBody struct {
	UserID string  `json:"user_id"`
	OrgID  string  `json:"org_id"`
	Status *string `json:"status"`
}

type membershipPatch struct {
	Status *string `json:"status"`
}

// joiner is the person a new membership would add, as the state knows
// them: whether they exist, the organizations of the memberships they
// hold, and their administrator grants.
type joiner struct {
	known  bool
	orgs   []string
	grants []grantRef
}

// joinerOf reads the person userID for the decision on a membership.
// It reads the same records whether or not the person exists, so that
// a refusal and an unknown id take the same steps.
func (a *api) joinerOf(userID string) (*joiner, error) {
	j := &joiner{}
	_, err := a.State.User(userID)
	switch {
	case err == nil:
		j.known = true
	case !errors.Is(err, fsm.ErrNotFound):
		return nil, err
	}
	ms, err := a.State.MembershipsOfUser(userID)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		j.orgs = append(j.orgs, m.OrgID)
	}
	if j.grants, err = a.grantsOf(userID); err != nil {
		return nil, err
	}
	return j, nil
}

// decide is the rule for an org_admin of org adding j to org (the body
// already names org; authz.go). Only a person who is org's already,
// every membership in org and no grant, may be added (the write then
// finds them a member, 409). Anyone else joins org only by accepting an
// invitation, with their own sign-in and second factor: never by an
// org_admin's write, which would hand the org_admin the person's
// address, phone, password and factors. That holds for a person of no
// organization too: they exist, so they are not new (an admin may have
// made them for another organization, or it removed them and may take
// them back), and a person's id is their sub at every application, so
// joining them to org shows org what they did elsewhere.
//
// A person org does not see (no membership in org: a member of others
// only, of none, an administrator, or nobody) is answered as an unknown
// user_id (hideUser), so the answer tells nothing of who exists; one it
// sees but who also belongs elsewhere or holds a grant is refused 403,
// as changing them is.
func (j *joiner) decide(org string) (verdict, string) {
	if j == nil || !j.known || !slices.Contains(j.orgs, org) {
		return hideUser, ""
	}
	for _, o := range j.orgs {
		if o != org {
			return forbid, "the person belongs to another organization too: they join by accepting an invitation"
		}
	}
	if len(j.grants) > 0 {
		return forbid, "the person holds an administrator grant: they join by accepting an invitation"
	}
	return allow, ""
}

// unknownUser answers POST /memberships as for a user_id that names no
// one: word for word the 422 that commit gives the state machine's
// NotFoundError on user_id (TestOrgAdminPullsNoOneIn keeps the two
// alike).
func unknownUser(w http.ResponseWriter, r *http.Request) {
	httpx.WriteError(w, r, http.StatusUnprocessableEntity, httpx.CodeValidation, "a referenced record does not exist",
		httpx.Detail{Field: "user_id", Message: "no such record", Code: "not_found"})
}

func (a *api) createMembership(w http.ResponseWriter, r *http.Request) {
	key, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	var b membershipBody
	if !decode(w, r, &b) {
		return
	}
	var p problems
	userID := p.uuid("user_id", b.UserID)
	orgID := p.uuid("org_id", b.OrgID)
	status := fsm.MembershipActive
	if b.Status != nil {
		status = *b.Status
		p.oneOf("status", status, fsm.MembershipActive, fsm.MembershipSuspended)
	}
	if len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	now := a.now()
	m := fsm.Membership{ID: a.createID(r, key), UserID: userID, OrgID: orgID, Status: status, CreatedAt: now, UpdatedAt: now}
	r, rp := withReplay(r, &replay{key: key, id: m.ID, read: func() (any, bool, error) {
		got, err := a.State.Membership(m.ID)
		return membershipOut(got), got.UserID == m.UserID && got.OrgID == m.OrgID, err
	}})
	if _, ok := a.applyCreate(w, r, fsm.MustCommand(fsm.TypeCreateMembership, fsm.CreateMembership{Membership: m}), rp); !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusCreated, membershipOut(m))
}

// listMemberships lists all memberships, or with ?user_id= those of one
// person.
// An org_admin's list holds the memberships of its organization only.
func (a *api) listMemberships(w http.ResponseWriter, r *http.Request) {
	org := orgScope(r)
	read := a.State.Memberships
	if org != "" {
		read = func(pg fsm.Page) ([]fsm.Membership, int, error) { return a.State.MembershipsInOrg(org, pg) }
	}
	if q := r.URL.Query(); q.Has("user_id") {
		var p problems
		userID := p.uuid("user_id", q.Get("user_id"))
		if len(p) > 0 {
			writeInvalid(w, r, p)
			return
		}
		read = func(pg fsm.Page) ([]fsm.Membership, int, error) { return a.membershipsOf(userID, org, pg) }
	}
	serveList(a, w, r, read, membershipOut)
}

// membershipsOf pages through one person's memberships; those in org
// only, unless org is "".
func (a *api) membershipsOf(userID, org string, pg fsm.Page) ([]fsm.Membership, int, error) {
	all, err := a.State.MembershipsOfUser(userID)
	if err != nil {
		return nil, 0, err
	}
	if org != "" {
		all = slices.DeleteFunc(all, func(m fsm.MembershipWithOrg) bool { return m.OrgID != org })
	}
	start := min((pg.Page-1)*pg.PageSize, len(all))
	end := min(start+pg.PageSize, len(all))
	return mapSlice(all[start:end], func(m fsm.MembershipWithOrg) fsm.Membership { return m.Membership }), len(all), nil
}

func (a *api) getMembership(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	m, err := a.State.Membership(id)
	if err != nil {
		a.readFailed(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, membershipOut(m))
}

func (a *api) updateMembership(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	var b membershipPatch
	if !decode(w, r, &b) {
		return
	}
	var p problems
	if b.Status == nil {
		p.add("status", codeRequired, "is required")
	} else {
		p.oneOf("status", *b.Status, fsm.MembershipActive, fsm.MembershipSuspended)
	}
	if len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	res, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeUpdateMembership, fsm.UpdateMembership{ID: id, Status: *b.Status, At: a.now()}))
	if !ok {
		return
	}
	m, err := valueOr(res, func() (fsm.Membership, error) { return a.State.Membership(id) })
	if err != nil {
		a.readFailed(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, membershipOut(m))
}

func (a *api) deleteMembership(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	if _, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeDeleteMembership, fsm.DeleteMembership{ID: id})); !ok {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
