package admin

import (
	"net/http"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// Grant makes a person an administrator (POST /admins). A person holds
// one grant per role, and org_admin for one organization at most; with
// several, the widest is in force (widestGrant).
type Grant struct {
	ID        string    `json:"id"`
	UserID    string    `json:"user_id"`
	Role      string    `json:"role"`
	OrgID     string    `json:"organization_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

func grantOut(g fsm.AdminGrant) Grant {
	return Grant{ID: g.ID, UserID: g.UserID, Role: g.Role, OrgID: g.OrgID, CreatedAt: g.CreatedAt}
}

type grantBody struct {
	UserID string `json:"user_id"`
	Role   string `json:"role"`
	OrgID  string `json:"organization_id"`
}

// roleAndOrg checks a role and the organization it needs: org_admin
// requires organization_id, the other roles refuse one.
func (p *problems) roleAndOrg(role, org string) string {
	if role == "" {
		p.add("role", codeRequired, "is required")
	} else {
		p.oneOf("role", role, RoleAdmin, RoleOrgAdmin, RoleAuditor)
	}
	switch {
	case role == RoleOrgAdmin:
		return p.uuid("organization_id", org)
	case org != "":
		p.add("organization_id", codeInvalid, "is only for the role %s", RoleOrgAdmin)
	}
	return org
}

// createAdmin is POST /admins.
func (a *api) createAdmin(w http.ResponseWriter, r *http.Request) {
	key, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	var b grantBody
	if !decode(w, r, &b) {
		return
	}
	var p problems
	userID := p.uuid("user_id", b.UserID)
	orgID := p.roleAndOrg(b.Role, b.OrgID)
	if len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	g := fsm.AdminGrant{ID: a.createID(r, key), UserID: userID, Role: b.Role, OrgID: orgID, CreatedAt: a.now()}
	r, rp := withReplay(r, &replay{key: key, id: g.ID, read: func() (any, bool, error) {
		got, err := a.State.AdminGrant(g.ID)
		return grantOut(got), got.UserID == g.UserID && got.Role == g.Role && got.OrgID == g.OrgID, err
	}})
	if _, ok := a.applyCreate(w, r, fsm.MustCommand(fsm.TypeCreateAdminGrant, fsm.CreateAdminGrant{Grant: g}), rp); !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusCreated, grantOut(g))
}

// listAdmins is GET /admins: every grant, in id order.
func (a *api) listAdmins(w http.ResponseWriter, r *http.Request) {
	serveList(a, w, r, a.State.AdminGrants, grantOut)
}

// deleteAdmin is DELETE /admins/{id}: the grant stops working with the
// next request on any node (the check reads grants after a read index).
func (a *api) deleteAdmin(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	if _, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeDeleteAdminGrant, fsm.DeleteAdminGrant{ID: id})); !ok {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
