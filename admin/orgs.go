package admin

import (
	"errors"
	"net/http"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// Org is an organization as the API shows it.
type Org struct {
	ID     string `json:"id"`
	Slug   string `json:"slug"`
	Name   string `json:"name"`
	Status string `json:"status"`
}

func orgOut(o fsm.Org) Org { return Org{ID: o.ID, Slug: o.Slug, Name: o.Name, Status: o.Status} }

type orgBody struct {
	Slug string `json:"slug"`
	Name string `json:"name"`
}

func (a *api) createOrg(w http.ResponseWriter, r *http.Request) {
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
	c := fsm.CreateOrg{ID: a.NewID(), Slug: b.Slug, Name: b.Name, CreatedAt: a.now()}
	if _, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeCreateOrg, c)); !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusCreated, Org{ID: c.ID, Slug: c.Slug, Name: c.Name, Status: fsm.OrgActive})
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
