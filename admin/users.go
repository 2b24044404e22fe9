package admin

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/password"
)

// User is a person as the API shows it; never the password hash, only its
// scheme: "argon2id", an imported "bcrypt", "pbkdf2-sha256" or
// "pbkdf2-sha512" not yet replaced by a sign-in, or absent when the
// person has no password. Phone is "" when none is set.
type User struct {
	ID             string `json:"id"`
	Email          string `json:"email"`
	EmailVerified  bool   `json:"email_verified"`
	Phone          string `json:"phone"`
	PasswordScheme string `json:"password_scheme,omitempty"`
}

func userOut(u fsm.User) User {
	return User{ID: u.ID, Email: u.Email, EmailVerified: u.EmailVerified, Phone: u.Phone,
		PasswordScheme: password.Scheme(u.PasswordHash)}
}

// userBody is the body of POST and PATCH /users; absent fields are nil.
type userBody struct {
	Email         *string `json:"email"`
	EmailVerified *bool   `json:"email_verified"`
	Password      *string `json:"password"`
	Phone         *string `json:"phone"` // "" clears it on PATCH
}

// check validates the given fields; create makes email required.
func (b *userBody) check(create bool) problems {
	var p problems
	if b.Email != nil || create {
		p.email("email", deref(b.Email))
	}
	if b.Password != nil {
		p.password("password", *b.Password)
	}
	if b.Phone != nil {
		p.phone("phone", *b.Phone)
	}
	return p
}

func deref[T any](v *T) T {
	var zero T
	if v == nil {
		return zero
	}
	return *v
}

// hashPassword answers 503 itself when the hasher gave up (the request's
// context ended while every slot was busy).
func (a *api) hashPassword(w http.ResponseWriter, r *http.Request, secret string) (string, bool) {
	h, err := a.Hasher.Hash(r.Context(), secret)
	if err != nil {
		a.Logger.Warn("admin: hash failed", "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
		w.Header().Set("Retry-After", "1")
		httpx.WriteError(w, r, http.StatusServiceUnavailable, httpx.CodeUnavailable, "server busy, try again")
		return "", false
	}
	return h, true
}

func (a *api) createUser(w http.ResponseWriter, r *http.Request) {
	key, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	var b userBody
	if !decode(w, r, &b) {
		return
	}
	if p := b.check(true); len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	verified, err := a.mayVerify(r, *b.Email, deref(b.EmailVerified))
	if err != nil {
		a.readFailed(w, r, err)
		return
	}
	now := a.now()
	u := fsm.User{ID: a.createID(r, key), Email: *b.Email, EmailVerified: verified, Phone: deref(b.Phone),
		CreatedAt: now, UpdatedAt: now}
	r, rp := withReplay(r, &replay{key: key, id: u.ID, read: func() (any, bool, error) {
		got, err := a.State.User(u.ID)
		return userOut(got), strings.EqualFold(got.Email, u.Email), err
	}})
	if a.replayed(w, r, rp) {
		return // before the password is hashed again
	}
	if b.Password != nil {
		if u.PasswordHash, ok = a.hashPassword(w, r, *b.Password); !ok {
			return
		}
	}
	if org := orgScope(r); org != "" {
		a.createMember(w, r, u, org, rp)
		return
	}
	if _, ok := a.commitCreate(w, r, a.stamp(r, fsm.MustCommand(fsm.TypeCreateUser, fsm.CreateUser{User: u})), rp); !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusCreated, userOut(u))
}

// mayVerify is what a request's email_verified (want) becomes for
// address: as asked from an admin (and false is always taken); from an
// org_admin of O, true only for an address in one of O's registration
// domains (registration.email_domains, whether or not registration is
// open), which only an admin adds (updateOrg), and false otherwise. An
// application trusts email_verified (to link an account to an address,
// say), so an org_admin vouches only for the domains an admin has said
// are O's. A pending invitation is no such word: the org_admin may send
// one to any address, and the person who follows it proves the address
// then (the invitation's page stores it verified). The error is the
// state's.
func (a *api) mayVerify(r *http.Request, address string, want bool) (bool, error) {
	org := orgScope(r)
	if !want || org == "" {
		return want, nil
	}
	o, err := a.State.Org(org)
	if err != nil {
		return false, err
	}
	_, domain, ok := splitAddress(address)
	if !ok {
		return false, nil
	}
	return o.Registration != nil && slices.Contains(o.Registration.EmailDomains, domain), nil
}

// splitAddress splits an address at its last '@' into its local part and
// its domain in the form registration domains are stored in
// (email.ASCIIDomain); ok is false when the domain is not such a name.
func splitAddress(address string) (local, domain string, ok bool) {
	at := strings.LastIndexByte(address, '@')
	if at < 1 {
		return "", "", false
	}
	domain, ok = email.ASCIIDomain(address[at+1:])
	return address[:at], domain, ok
}

// createMember creates the person u as an active member of org in one
// write, for an org_admin, whose people must belong to its organization
// (authz.go): the import command of one person, which creates the
// person and the membership together or neither. A retry (rp) meets
// the person by address, under the id the key gave them.
func (a *api) createMember(w http.ResponseWriter, r *http.Request, u fsm.User, org string, rp *replay) {
	cmd := fsm.ImportUsers{At: u.CreatedAt, Users: []fsm.ImportedUser{{User: u, OrgIDs: []string{org}, MembershipIDs: []string{a.NewID()}}}}
	r = withTouch(r, org, u.ID)
	res, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeImportUsers, cmd))
	if !ok {
		return
	}
	out, ok := res.Value.([]fsm.ImportOutcome)
	if !ok || len(out) != 1 {
		out = a.importOutcomesFromState(cmd)
	}
	switch o := out[0]; {
	case o.Status == fsm.ImportCreated:
		httpx.WriteJSON(w, http.StatusCreated, userOut(u))
	case ((o.Status == fsm.ImportExists && o.ID == u.ID) || (o.Code == "conflict" && o.Field == "id")) && a.replayed(w, r, rp):
	case o.Status == fsm.ImportExists:
		httpx.WriteError(w, r, http.StatusConflict, httpx.CodeConflict, conflictMessage("email"),
			httpx.Detail{Field: "email", Message: "already in use", Code: "conflict"})
	case o.Code == "conflict":
		httpx.WriteError(w, r, http.StatusConflict, httpx.CodeConflict, conflictMessage(o.Field),
			httpx.Detail{Field: o.Field, Message: "already in use", Code: "conflict"})
	case o.Field == "organizations":
		httpx.WriteError(w, r, http.StatusConflict, httpx.CodeConflict, "the organization no longer exists")
	default:
		// A field the state machine refuses though it passed check
		// (client input never makes a 500).
		writeInvalid(w, r, []httpx.Detail{{Field: o.Field, Code: o.Code, Message: importCodeMessage(o.Code)}})
	}
}

// listUsers is GET /users; ?email= finds the one person with that address
// (any case), or none: how an operator finds an imported person's id.
func (a *api) listUsers(w http.ResponseWriter, r *http.Request) {
	org := orgScope(r) // an org_admin's list: the members of its organization
	read := a.State.Users
	if org != "" {
		read = func(pg fsm.Page) ([]fsm.User, int, error) { return a.State.MembersOfOrg(org, pg) }
	}
	if q := r.URL.Query(); q.Has("email") {
		email := q.Get("email")
		if email == "" || len(email) > maxEmail {
			writeInvalid(w, r, []httpx.Detail{{Field: "email", Code: codeInvalid, Message: "must be an address of at most 254 bytes"}})
			return
		}
		read = func(pg fsm.Page) ([]fsm.User, int, error) {
			u, err := a.State.UserByEmail(email)
			switch {
			case errors.Is(err, fsm.ErrNotFound):
				return nil, 0, nil
			case err != nil:
				return nil, 0, err
			}
			if org != "" {
				if _, err := a.State.MembershipOf(u.ID, org); errors.Is(err, fsm.ErrNotFound) {
					return nil, 0, nil
				} else if err != nil {
					return nil, 0, err
				}
			}
			if pg.Page > 1 {
				return nil, 1, nil
			}
			return []fsm.User{u}, 1, nil
		}
	}
	serveList(a, w, r, read, userOut)
}

// pathUser reads the person the {id} path value names; it has answered
// (400, 404 or 503) when ok is false.
func (a *api) pathUser(w http.ResponseWriter, r *http.Request) (fsm.User, bool) {
	id, ok := pathUUID(w, r)
	if !ok {
		return fsm.User{}, false
	}
	u, err := a.State.User(id)
	if err != nil {
		a.readFailed(w, r, err)
		return fsm.User{}, false
	}
	return u, true
}

func (a *api) getUser(w http.ResponseWriter, r *http.Request) {
	u, ok := a.pathUser(w, r)
	if !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, userOut(u))
}

// updateUser changes the given fields. A new address (not merely a change
// of case) is unverified unless the body also sets email_verified: the old
// proof of ownership says nothing about it.
func (a *api) updateUser(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	var b userBody
	if !decode(w, r, &b) {
		return
	}
	if p := b.check(false); len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	// Read first: a missing user is a 404 before any hashing work. The
	// command is still authoritative (the user may vanish in between).
	cur, err := a.State.User(id)
	if err != nil {
		a.readFailed(w, r, err)
		return
	}
	c := fsm.UpdateUser{ID: id, Email: b.Email, EmailVerified: b.EmailVerified, Phone: b.Phone, At: a.now()}
	if deref(b.EmailVerified) {
		// An org_admin's true that its organization does not cover is
		// not taken: the address keeps what it had (false when it is new,
		// below), since a proof the person made themselves still stands.
		addr := cur.Email
		if b.Email != nil {
			addr = *b.Email
		}
		ok, err := a.mayVerify(r, addr, true)
		if err != nil {
			a.readFailed(w, r, err)
			return
		}
		if !ok {
			c.EmailVerified = nil
		}
	}
	if b.Email != nil && c.EmailVerified == nil && !strings.EqualFold(*b.Email, cur.Email) {
		c.EmailVerified = new(bool)
	}
	if b.Password != nil {
		h, ok := a.hashPassword(w, r, *b.Password)
		if !ok {
			return
		}
		c.PasswordHash = &h
	}
	if b.Password != nil || (b.Phone != nil && *b.Phone != cur.Phone) {
		// A reset evicts whoever held a session: every SSO session of the
		// person ends in the same apply, with logout tokens to the apps.
		c.EndSessions = &fsm.EndSessions{At: c.At}
	}
	res, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeUpdateUser, c))
	if !ok {
		return
	}
	u, err := valueOr(res, func() (fsm.User, error) { return a.State.User(id) })
	if err != nil {
		a.readFailed(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, userOut(u))
}

// deleteUser erases the person and their memberships.
func (a *api) deleteUser(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	// The same command ends every session of the person and records the
	// sub-only back-channel logout deliveries (account erasure).
	if _, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeDeleteUser, fsm.DeleteUser{ID: id, At: a.now()})); !ok {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
