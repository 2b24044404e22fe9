package admin

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// Org is an organization as the API shows it.
type Org struct {
	ID           string       `json:"id"`
	Slug         string       `json:"slug"`
	Name         string       `json:"name"`
	Status       string       `json:"status"`
	Registration Registration `json:"registration"`
	// Branding is the organization's own (every field "" when it has
	// none: its pages show the site's, GET /branding).
	Branding Branding `json:"branding"`
}

// Registration is an organization's self-registration: people whose
// address is in one of EmailDomains (lower case, internationalized names
// in punycode) may register themselves into it while Enabled (and the
// provider sends mail).
type Registration struct {
	Enabled      bool     `json:"enabled"`
	EmailDomains []string `json:"email_domains"`
}

func orgOut(o fsm.Org) Org {
	out := Org{ID: o.ID, Slug: o.Slug, Name: o.Name, Status: o.Status, Registration: Registration{EmailDomains: []string{}}}
	if reg := o.Registration; reg != nil {
		out.Registration.Enabled = reg.Enabled
		out.Registration.EmailDomains = append(out.Registration.EmailDomains, reg.EmailDomains...)
	}
	out.Branding = brandingOut(o.Branding)
	return out
}

type orgBody struct {
	Slug string `json:"slug"`
	Name string `json:"name"`
}

func (a *api) createOrg(w http.ResponseWriter, r *http.Request) {
	key, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	var b orgBody
	if !decode(w, r, &b) {
		return
	}
	var p problems
	p.slug("slug", b.Slug)
	p.name("name", b.Name)
	if len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	c := fsm.CreateOrg{ID: a.createID(r, key), Slug: b.Slug, Name: b.Name, CreatedAt: a.now()}
	r, rp := withReplay(r, &replay{key: key, id: c.ID, read: func() (any, bool, error) {
		o, err := a.State.Org(c.ID)
		return orgOut(o), o.Slug == c.Slug && o.Name == c.Name, err
	}})
	if _, ok := a.applyCreate(w, r, fsm.MustCommand(fsm.TypeCreateOrg, c), rp); !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusCreated, orgOut(fsm.Org{ID: c.ID, Slug: c.Slug, Name: c.Name, Status: fsm.OrgActive}))
}

// listOrgs lists the organizations; an org_admin's, its own.
func (a *api) listOrgs(w http.ResponseWriter, r *http.Request) {
	read := a.State.Orgs
	if org := orgScope(r); org != "" {
		read = func(pg fsm.Page) ([]fsm.Org, int, error) {
			o, err := a.State.Org(org)
			switch {
			case errors.Is(err, fsm.ErrNotFound):
				return nil, 0, nil
			case err != nil:
				return nil, 0, err
			case pg.Page > 1:
				return nil, 1, nil
			}
			return []fsm.Org{o}, 1, nil
		}
	}
	serveList(a, w, r, read, orgOut)
}

func (a *api) getOrg(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	o, err := a.State.Org(id)
	if err != nil {
		a.readFailed(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, orgOut(o))
}

// deleteOrg marks the organization deleted; deleting a deleted one is a
// no-op answered 204 as well.
func (a *api) deleteOrg(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	// The same command ends the organization's app sessions and records the
	// back-channel logout deliveries; the leader sends them.
	if _, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeDeleteOrg, fsm.DeleteOrg{ID: id, At: a.now()})); !ok {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// orgPatch is the body of PATCH /organizations/{id}; absent fields keep
// their values, and so do the absent fields of registration.
type orgPatch struct {
	Name         *string            `json:"name"`
	Registration *registrationPatch `json:"registration"`
	Branding     *brandingBody      `json:"branding"`
}

type registrationPatch struct {
	Enabled      *bool     `json:"enabled"`
	EmailDomains *[]string `json:"email_domains"`
}

// updateOrg is PATCH /organizations/{id}: its name, and who may register
// themselves into it. The registration settings are merged with the
// stored ones and the whole is checked (registration): domains
// normalized, at most 100, each once, at least one while enabled.
func (a *api) updateOrg(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	var b orgPatch
	// The body may carry a logo (branding).
	if err := httpx.DecodeJSONLimit(w, r, &b, maxBrandingBody); err != nil {
		httpx.WriteBodyError(w, r, err)
		return
	}
	var p problems
	if b.Name == nil && b.Registration == nil && b.Branding == nil {
		p.add("body", codeRequired, "give name, registration or branding")
	}
	if b.Name != nil {
		p.name("name", *b.Name)
	}
	if b.Registration != nil && b.Registration.Enabled == nil && b.Registration.EmailDomains == nil {
		p.add("registration", codeRequired, "give enabled or email_domains")
	}
	if len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	c := fsm.UpdateOrg{ID: id, Name: b.Name}
	var cur fsm.Org
	if b.Registration != nil || b.Branding != nil {
		var err error
		if cur, err = a.State.Org(id); err != nil {
			a.readFailed(w, r, err)
			return
		}
		if cur.Status == fsm.OrgDeleted {
			notFound(w, r)
			return
		}
	}
	if bb := b.Branding; bb != nil {
		if !a.mayBrand(w, r, id) {
			return
		}
		var base fsm.Branding
		if cur.Branding != nil {
			base = *cur.Branding
		}
		next := p.branding("branding.", base, bb)
		if len(p) > 0 {
			writeInvalid(w, r, p)
			return
		}
		c.Branding = &next // zero: cleared, the site's applies
	}
	if rp := b.Registration; rp != nil {
		reg := fsm.Registration{EmailDomains: []string{}}
		if cur.Registration != nil {
			reg.Enabled = cur.Registration.Enabled
			reg.EmailDomains = append(reg.EmailDomains, cur.Registration.EmailDomains...)
		}
		if rp.Enabled != nil {
			reg.Enabled = *rp.Enabled
		}
		if rp.EmailDomains != nil {
			reg.EmailDomains = append([]string{}, *rp.EmailDomains...)
		}
		p.registration(&reg)
		if len(p) > 0 {
			writeInvalid(w, r, p)
			return
		}
		if d, ok := addedDomain(cur.Registration, reg.EmailDomains); ok && orgScope(r) != "" {
			httpx.WriteError(w, r, http.StatusForbidden, httpx.CodeForbidden, fmt.Sprintf(
				"forbidden: only an admin adds a registration domain (%s): it says whose addresses the organization's are, which its people's email_verified rests on; an org_admin may open or close registration and remove domains", d))
			return
		}
		c.Registration = &reg
	}
	res, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeUpdateOrg, c))
	if !ok {
		return
	}
	o, err := valueOr(res, func() (fsm.Org, error) { return a.State.Org(id) })
	if err != nil {
		a.readFailed(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, orgOut(o))
}

// addedDomain is a domain of next that cur's registration does not hold
// (the first, in next's order), if any. An org_admin may not add one: a
// registration domain lets anyone with an address there register into
// the organization and lets its org_admin set email_verified for
// addresses there (mayVerify), so it is a claim an admin makes for the
// organization, as a sign-in provider's email_domains are.
func addedDomain(cur *fsm.Registration, next []string) (string, bool) {
	for _, d := range next {
		if cur == nil || !slices.Contains(cur.EmailDomains, d) {
			return d, true
		}
	}
	return "", false
}
