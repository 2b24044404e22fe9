package admin

import (
	"errors"
	"fmt"
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
	CreatedBy Maker     `json:"created_by"`
	Key       string    `json:"key,omitempty"`
}

// Maker names the credential that made an API key, as detail.credential
// names who acted: {"kind":"person","sub":...}, {"kind":"api_key","id":...}
// or {"kind":"token"}. A key belongs to its maker (fsm, "Who made an API
// key"): it ends when the maker's authority does, and acts at most as the
// maker may now. The token's kind also stands for every key made before
// makers were recorded (oidcd 0.3.0 and earlier).
type Maker struct {
	Kind string `json:"kind"`          // CredentialPerson, CredentialAPIKey or CredentialToken
	Sub  string `json:"sub,omitempty"` // the person's user id
	ID   string `json:"id,omitempty"`  // the key's id
}

func makerOut(k fsm.APIKey) Maker {
	switch k.MakerKind {
	case fsm.MakerPerson:
		return Maker{Kind: CredentialPerson, Sub: k.MakerID}
	case fsm.MakerAPIKey:
		return Maker{Kind: CredentialAPIKey, ID: k.MakerID}
	}
	return Maker{Kind: CredentialToken}
}

func apiKeyOut(k fsm.APIKey) APIKey {
	return APIKey{ID: k.ID, Name: k.Name, Role: k.Role, OrgID: k.OrgID, CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt, CreatedBy: makerOut(k)}
}

// makerFeature is what the state-format gate's 409 names when the cluster
// cannot take a key with a maker yet (a rolling upgrade under way).
const makerFeature = "an API key that records who made it (a person or another API key)"

// refuseMakerLapsed answers a create whose maker lost the authority for
// the key between the credential check and the write.
func refuseMakerLapsed(w http.ResponseWriter, r *http.Request) {
	httpx.WriteError(w, r, http.StatusForbidden, httpx.CodeForbidden,
		"the credential that asks no longer holds the authority for this key (a grant removed or narrowed, or the key that asks deleted, a moment ago): nothing was made")
}

type apiKeyBody struct {
	Name      string `json:"name"`
	Role      string `json:"role"`
	OrgID     string `json:"organization_id"`
	ExpiresIn *int64 `json:"expires_in"`
}

// createAPIKey is POST /api-keys. The key is shown in this answer only;
// the state keeps its hash. It records the credential that asks as its
// maker (recordMaker); while the cluster's state format cannot take a
// maker yet (a rolling upgrade), a key made by a person or a key is
// refused, 409, and the break-glass token's keys are made as before.
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
	if !a.recordMaker(w, r, &k) {
		return
	}
	// A retry cannot show the key again: only its hash is kept.
	r, rp := withReplay(r, &replay{key: key, id: id, read: func() (any, bool, error) {
		got, err := a.State.APIKey(id)
		return apiKeyOut(got), got.Name == k.Name && got.Role == k.Role && got.OrgID == k.OrgID &&
			got.MakerKind == k.MakerKind && got.MakerID == k.MakerID, err
	}, shownOnce: func(id string) string {
		return shownOnceMessage("API key", id, "key", "delete it (DELETE /admin/v1/api-keys/"+id+") and create another")
	}})
	if a.replayed(w, r, rp) {
		return
	}
	cmd := fsm.MustCommand(fsm.TypeCreateAPIKey, fsm.CreateAPIKey{Key: k})
	if cmd.Feature != "" {
		cmd.Feature = makerFeature
	}
	// commitCreate's answers, and the maker's authority lapsed meanwhile.
	if _, ok := a.commitWith(w, r, a.stamp(r, cmd), func(res fsm.Result) bool {
		var ce *fsm.ConflictError
		switch {
		case errors.Is(res.Err, fsm.ErrMakerLapsed):
			refuseMakerLapsed(w, r)
			return true
		case rp != nil && errors.As(res.Err, &ce) && ce.Field == "id":
			return a.replayed(w, r, rp)
		}
		return false
	}); !ok {
		return
	}
	out := apiKeyOut(k)
	out.Key = secret
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusCreated, out)
}

// recordMaker sets k's maker to the credential that asks (the token is
// recorded as none, fsm.MakerToken). A key made by a key expires no later
// than that key, and is made only by a key fewer than fsm.MaxAPIKeyChain
// deep; ok is false when it answered a refusal.
func (a *api) recordMaker(w http.ResponseWriter, r *http.Request, k *fsm.APIKey) (ok bool) {
	c, _ := CredentialFrom(r.Context())
	switch c.Kind {
	case CredentialPerson:
		k.MakerKind, k.MakerID = fsm.MakerPerson, c.Sub
	case CredentialAPIKey:
		if c.keyDepth >= fsm.MaxAPIKeyChain {
			httpx.WriteError(w, r, http.StatusForbidden, httpx.CodeForbidden, fmt.Sprintf(
				"this API key is the last of %d made by one another, the most there may be: create the key with a person's sign-in, the break-glass token or a key made by one of them", fsm.MaxAPIKeyChain))
			return false
		}
		k.MakerKind, k.MakerID = fsm.MakerAPIKey, c.ID
		if k.ExpiresAt.After(c.keyExpires) {
			k.ExpiresAt = c.keyExpires
		}
		if !k.ExpiresAt.After(k.CreatedAt) {
			refuseKey.write(w, r) // the asking key expired a moment ago
			return false
		}
	}
	return true
}

// listAPIKeys is GET /api-keys: every key, expired ones until the reap
// clears them away, never the key itself.
func (a *api) listAPIKeys(w http.ResponseWriter, r *http.Request) {
	serveList(a, w, r, a.State.APIKeys, apiKeyOut)
}

// deleteAPIKey is DELETE /api-keys/{id}: the key, and every key it made
// (transitively, in the same write), stops working with the next request
// on any node (the check reads keys after a read index).
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
