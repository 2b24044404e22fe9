package admin

import (
	"net/http"
	"strconv"
	"time"

	"github.com/oidcd/oidcd/directory"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// Bounds of a directory's sync interval; DefaultSyncInterval when none is
// given.
const (
	DefaultSyncInterval = 15 * time.Minute
	minSyncInterval     = time.Second
	maxSyncInterval     = 24 * time.Hour
)

// Directory is a directory as the API shows it: never the bind password,
// only whether one is set.
type Directory struct {
	ID              string             `json:"id"`
	Name            string             `json:"name"`
	URL             string             `json:"url"`
	StartTLS        bool               `json:"start_tls"`
	CAPEM           string             `json:"ca_pem,omitempty"`
	Insecure        bool               `json:"insecure"`
	BindDN          string             `json:"bind_dn"`
	BindPasswordSet bool               `json:"bind_password_set"`
	UserBase        string             `json:"user_base"`
	UserFilter      string             `json:"user_filter"`
	IDAttribute     string             `json:"id_attribute"`
	EmailAttribute  string             `json:"email_attribute"`
	PhoneAttribute  string             `json:"phone_attribute,omitempty"`
	GroupBase       string             `json:"group_base,omitempty"`
	GroupFilter     string             `json:"group_filter,omitempty"`
	Organizations   []fsm.DirectoryOrg `json:"organizations"`
	SyncInterval    string             `json:"sync_interval"`
	LastSync        *fsm.DirectorySync `json:"last_sync,omitempty"`
	CreatedAt       time.Time          `json:"created_at"`
	UpdatedAt       time.Time          `json:"updated_at"`
}

func directoryOut(d fsm.Directory) Directory {
	orgs := d.Organizations
	if orgs == nil {
		orgs = []fsm.DirectoryOrg{}
	}
	return Directory{ID: d.ID, Name: d.Name, URL: d.URL, StartTLS: d.StartTLS, CAPEM: d.CAPEM, Insecure: d.Insecure,
		BindDN: d.BindDN, BindPasswordSet: len(d.BindPassword) > 0, UserBase: d.UserBase, UserFilter: d.UserFilter,
		IDAttribute: d.IDAttribute, EmailAttribute: d.EmailAttribute, PhoneAttribute: d.PhoneAttribute,
		GroupBase: d.GroupBase, GroupFilter: d.GroupFilter, Organizations: orgs, SyncInterval: d.SyncInterval.String(),
		LastSync: d.LastSync, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
}

// directoryBody is the body of POST and PATCH /directories; absent fields
// are nil (PATCH keeps them).
type directoryBody struct {
	Name           *string             `json:"name"`
	URL            *string             `json:"url"`
	StartTLS       *bool               `json:"start_tls"`
	CAPEM          *string             `json:"ca_pem"`
	Insecure       *bool               `json:"insecure"`
	BindDN         *string             `json:"bind_dn"`
	BindPassword   *string             `json:"bind_password"`
	UserBase       *string             `json:"user_base"`
	UserFilter     *string             `json:"user_filter"`
	IDAttribute    *string             `json:"id_attribute"`
	EmailAttribute *string             `json:"email_attribute"`
	PhoneAttribute *string             `json:"phone_attribute"`
	GroupBase      *string             `json:"group_base"`
	GroupFilter    *string             `json:"group_filter"`
	Organizations  *[]fsm.DirectoryOrg `json:"organizations"`
	SyncInterval   *string             `json:"sync_interval"`
}

// apply sets the given fields on d; the password comes back apart (nil:
// unchanged).
func (b *directoryBody) apply(d *fsm.Directory) (password *string, p problems) {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&d.Name, b.Name)
	set(&d.URL, b.URL)
	set(&d.CAPEM, b.CAPEM)
	set(&d.BindDN, b.BindDN)
	set(&d.UserBase, b.UserBase)
	set(&d.UserFilter, b.UserFilter)
	set(&d.IDAttribute, b.IDAttribute)
	set(&d.EmailAttribute, b.EmailAttribute)
	set(&d.PhoneAttribute, b.PhoneAttribute)
	set(&d.GroupBase, b.GroupBase)
	set(&d.GroupFilter, b.GroupFilter)
	if b.StartTLS != nil {
		d.StartTLS = *b.StartTLS
	}
	if b.Insecure != nil {
		d.Insecure = *b.Insecure
	}
	if b.Organizations != nil {
		d.Organizations = *b.Organizations
	}
	if b.SyncInterval != nil {
		iv, err := time.ParseDuration(*b.SyncInterval)
		if err != nil || iv < minSyncInterval || iv > maxSyncInterval {
			p.add("sync_interval", codeOutOfRange, "must be a duration from %s to %s, e.g. 15m", minSyncInterval, maxSyncInterval)
		}
		d.SyncInterval = iv
	}
	p.name("name", d.Name)
	if len(d.Organizations) > maxOrganizations {
		p.add("organizations", codeTooMany, "must hold at most %d mappings", maxOrganizations)
	}
	for i, o := range d.Organizations {
		f := "organizations[" + strconv.Itoa(i) + "]"
		d.Organizations[i].OrgID = p.uuid(f+".organization_id", o.OrgID)
		if o.GroupDN == "" || len(o.GroupDN) > maxURI {
			p.add(f+".group_dn", codeInvalid, "must be the DN of a group")
		}
	}
	if err := directory.Check(directoryConfig(*d, "")); err != nil {
		p.add(directory.Field(err), codeInvalid, "%s", err)
	}
	return b.BindPassword, p
}

// directoryConfig is the client configuration of d with its password.
func directoryConfig(d fsm.Directory, password string) directory.Config {
	return directory.Config{URL: d.URL, StartTLS: d.StartTLS, CAPEM: d.CAPEM, Insecure: d.Insecure,
		BindDN: d.BindDN, BindPassword: password, UserBase: d.UserBase, UserFilter: d.UserFilter,
		IDAttribute: d.IDAttribute, EmailAttribute: d.EmailAttribute, PhoneAttribute: d.PhoneAttribute,
		GroupBase: d.GroupBase, GroupFilter: d.GroupFilter}
}

// sealBindPassword seals pw under the KEK for directory id.
func (a *api) sealBindPassword(w http.ResponseWriter, r *http.Request, id, pw string) ([]byte, bool) {
	sealed, err := a.KEK.Seal([]byte(pw), fsm.DirectoryAAD(id))
	if err != nil {
		a.unavailable(w, r, "seal the bind password", err)
		return nil, false
	}
	return sealed, true
}

func (a *api) createDirectory(w http.ResponseWriter, r *http.Request) {
	key, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	var b directoryBody
	if !decode(w, r, &b) {
		return
	}
	now := a.now()
	d := fsm.Directory{ID: a.createID(r, key), EmailAttribute: "mail", SyncInterval: DefaultSyncInterval, CreatedAt: now, UpdatedAt: now}
	pw, p := b.apply(&d)
	if pw == nil || *pw == "" {
		p.add("bind_password", codeRequired, "is required (the search account's password)")
	}
	if len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	r, rp := withReplay(r, &replay{key: key, id: d.ID, read: func() (any, bool, error) {
		got, err := a.State.Directory(d.ID)
		return directoryOut(got), got.Name == d.Name && got.URL == d.URL, err
	}})
	if a.replayed(w, r, rp) {
		return // before the password is sealed again
	}
	if d.BindPassword, ok = a.sealBindPassword(w, r, d.ID, *pw); !ok {
		return
	}
	res, ok := a.commitCreate(w, r, a.stamp(r, fsm.MustCommand(fsm.TypePutDirectory, fsm.PutDirectory{Directory: d, Create: true})), rp)
	if !ok {
		return
	}
	if v, isDir := res.Value.(fsm.Directory); isDir {
		d = v
	}
	httpx.WriteJSON(w, http.StatusCreated, directoryOut(d))
}

func (a *api) listDirectories(w http.ResponseWriter, r *http.Request) {
	ds, err := a.State.Directories()
	if err != nil {
		a.unavailable(w, r, "read state", err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, struct {
		Data []Directory `json:"data"`
	}{mapSlice(ds, directoryOut)})
}

func (a *api) pathDirectory(w http.ResponseWriter, r *http.Request) (fsm.Directory, bool) {
	id, ok := pathUUID(w, r)
	if !ok {
		return fsm.Directory{}, false
	}
	d, err := a.State.Directory(id)
	if err != nil {
		a.readFailed(w, r, err)
		return fsm.Directory{}, false
	}
	return d, true
}

func (a *api) getDirectory(w http.ResponseWriter, r *http.Request) {
	if d, ok := a.pathDirectory(w, r); ok {
		httpx.WriteJSON(w, http.StatusOK, directoryOut(d))
	}
}

// updateDirectory changes the given fields; a new bind_password replaces
// the stored one, an absent one keeps it.
func (a *api) updateDirectory(w http.ResponseWriter, r *http.Request) {
	d, ok := a.pathDirectory(w, r)
	if !ok {
		return
	}
	var b directoryBody
	if !decode(w, r, &b) {
		return
	}
	pw, p := b.apply(&d)
	if pw != nil && *pw == "" {
		p.add("bind_password", codeRequired, "must not be empty; leave it out to keep the stored one")
	}
	if len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	d.BindPassword, d.UpdatedAt = nil, a.now()
	if pw != nil {
		if d.BindPassword, ok = a.sealBindPassword(w, r, d.ID, *pw); !ok {
			return
		}
	}
	res, ok := a.apply(w, r, fsm.MustCommand(fsm.TypePutDirectory, fsm.PutDirectory{Directory: d}))
	if !ok {
		return
	}
	out, err := valueOr(res, func() (fsm.Directory, error) { return a.State.Directory(d.ID) })
	if err != nil {
		a.readFailed(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, directoryOut(out))
}

// deleteDirectory removes the directory; its people stay and cannot sign
// in until it is registered again.
func (a *api) deleteDirectory(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	if _, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeDeleteDirectory, fsm.DeleteDirectory{ID: id})); !ok {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
