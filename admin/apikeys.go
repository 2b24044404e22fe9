package admin

import (
	"net/http"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// maxKeyLifetime bounds expires_in of a new API key (seconds): a year.
const maxKeyLifetime = int64(fsm.MaxAPIKeyLifetime / time.Second)

// APIKey describes an API key; Key, the credential itself, is set only in
// the answer of its creation.
type APIKey struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	OrgID     string    `json:"organization_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	Key       string    `json:"key,omitempty"`
}

func apiKeyOut(k fsm.APIKey) APIKey {
	return APIKey{ID: k.ID, Name: k.Name, Role: k.Role, OrgID: k.OrgID, CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt}
}

type apiKeyBody struct {
	Name      string `json:"name"`
	Role      string `json:"role"`
	OrgID     string `json:"organization_id"`
	ExpiresIn *int64 `json:"expires_in"`
}

// createAPIKey is POST /api-keys. The key is shown in this answer only;
// the state keeps its hash.
func (a *api) createAPIKey(w http.ResponseWriter, r *http.Request) {
	key, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	var b apiKeyBody
	if !decode(w, r, &b) {
		return
	}
	var p problems
	p.name("name", b.Name)
	orgID := p.roleAndOrg(b.Role, b.OrgID)
	switch {
	case b.ExpiresIn == nil:
		p.add("expires_in", codeRequired, "is required")
	case *b.ExpiresIn < 1 || *b.ExpiresIn > maxKeyLifetime:
		p.add("expires_in", codeOutOfRange, "must be a number of seconds from 1 to %d (a year)", maxKeyLifetime)
	}
	if len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	now := a.now()
	id := a.createID(r, key)
	secret, hash := newAPIKey(id)
	k := fsm.APIKey{ID: id, Name: b.Name, Role: b.Role, OrgID: orgID, Hash: hash, CreatedAt: now,
		ExpiresAt: now.Add(time.Duration(*b.ExpiresIn) * time.Second)}
	// A retry cannot show the key again: only its hash is kept.
	r, rp := withReplay(r, &replay{key: key, id: id, read: func() (any, bool, error) {
		got, err := a.State.APIKey(id)
		return apiKeyOut(got), got.Name == k.Name && got.Role == k.Role && got.OrgID == k.OrgID, err
	}, shownOnce: func(id string) string {
		return shownOnceMessage("API key", id, "key", "delete it (DELETE /admin/v1/api-keys/"+id+") and create another")
	}})
	if _, ok := a.applyCreate(w, r, fsm.MustCommand(fsm.TypeCreateAPIKey, fsm.CreateAPIKey{Key: k}), rp); !ok {
		return
	}
	out := apiKeyOut(k)
	out.Key = secret
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusCreated, out)
}

// listAPIKeys is GET /api-keys: every key, expired ones until the reap
// clears them away, never the key itself.
func (a *api) listAPIKeys(w http.ResponseWriter, r *http.Request) {
	serveList(a, w, r, a.State.APIKeys, apiKeyOut)
}

// deleteAPIKey is DELETE /api-keys/{id}: the key stops working with the
// next request on any node (the check reads keys after a read index).
func (a *api) deleteAPIKey(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	if _, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeDeleteAPIKey, fsm.DeleteAPIKey{ID: id})); !ok {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
