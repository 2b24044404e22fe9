package admin

import (
	"net/http"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// adminTokenAnswer is the answer of POST /admin-token.
type adminTokenAnswer struct {
	Token string `json:"token"`
}

// replaceAdminToken is POST /admin-token: a new break-glass token, shown
// this once. The state keeps its hash in place of the old one's, so the
// old token is refused by every node as soon as it has applied the
// write (this one before it answers). A node's --admin-token and token
// file no longer match afterwards; the node says so in its log and keeps
// the state's token.
func (a *api) replaceAdminToken(w http.ResponseWriter, r *http.Request) {
	token := GenerateToken()
	cmd := fsm.MustCommand(fsm.TypeSetAdminToken, fsm.SetAdminToken{Hash: HashToken(token), Replace: true})
	if _, ok := a.apply(w, r, cmd); !ok {
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusCreated, adminTokenAnswer{Token: token})
}
