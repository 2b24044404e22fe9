package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/internal/httpx"
)

// entity is one kind of record the console lists, creates and deletes
// (organizations, people, memberships, clients, administrators' grants,
// API keys). The flow is the same for
// each: a paged list page with a create form; a create that shows the list
// again with the API's problems, or redirects; a deletion, confirmed on a
// page of its own when it has consequences, that redirects back with a
// notice. An entity only says what differs.
type entity[T any] struct {
	api   string // the admin API collection: "/organizations"
	path  string // the console path under Prefix: "organizations"
	nav   string // the navigation tab
	title string // the list page's title
	page  string // the list page's template
	key   string // the notices' prefix (doneMessages): "org" for org-created, org-deleted

	// defaults fill the create form of a fresh list page.
	defaults url.Values
	// data is the list page's data for one page of records.
	data func(c *Console, r *http.Request, items []T, pg pager) any
	// body turns the create form into the API's body; problems it finds
	// before the API is asked are returned as details.
	body func(f url.Values) (any, []httpx.Detail)
	// bodyOf, when set instead of body, may ask the API first (a person
	// named by email).
	bodyOf func(c *Console, r *http.Request, f url.Values) (any, []httpx.Detail)
	// reshow is the form shown again after a failed create (nil: as sent).
	reshow func(url.Values) url.Values
	// created answers a successful create (nil: back, with key-created).
	created func(c *Console, w http.ResponseWriter, r *http.Request, item T)

	// Deletion. Without what, a deletion is not confirmed first.
	what        string                    // "organization"
	consequence string                    // what deleting one does
	name        func(T) (id, name string) // its id and how the confirmation names it
	back        func(id string) string    // where the confirmation's Back goes (nil: the list)
}

// register routes the entity's pages.
func (e *entity[T]) register(c *Console, auth func(pattern string, h http.HandlerFunc)) {
	auth("GET "+Prefix+e.path, e.list(c))
	auth("POST "+Prefix+e.path, e.create(c))
	if e.what != "" {
		auth("GET "+Prefix+e.path+"/{id}/delete", e.confirmDelete(c))
	}
	auth("POST "+Prefix+e.path+"/{id}/delete", e.delete(c))
}

func (e *entity[T]) listPath() string { return Prefix + e.path }

func (e *entity[T]) list(c *Console) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := c.newView(w, r, e.title, e.nav)
		if e.defaults != nil {
			v.Form = e.defaults
		}
		e.render(c, w, r, v, 0)
	}
}

// listAll is the list page of an admin API collection read whole, without
// pages or a create form (signing keys, directories: a handful of records,
// changed elsewhere): the page shows the records, or the API's error with
// its status.
func listAll[T any](c *Console, title, nav, api, page string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := c.newView(w, r, title, nav)
		var list struct {
			Data []T `json:"data"`
		}
		status := 0
		if err := c.call(r, "GET", api, nil, &list); err != nil {
			status = c.fail(r, v, err)
		}
		v.Data = list.Data
		c.render(w, status, page, v)
	}
}

// render renders the list page with v, answering status unless the list
// call fails.
func (e *entity[T]) render(c *Console, w http.ResponseWriter, r *http.Request, v *view, status int) {
	items, pg, status := listPage[T](c, r, v, status, e.api, e.path)
	v.Data = e.data(c, r, items, pg)
	c.render(w, status, e.page, v)
}

// create posts the form. A form sent from another console page names it
// in "return": a failure there is a page of its own, success goes back.
func (e *entity[T]) create(c *Console) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f := r.PostForm
		back := returnTo(f.Get("return"), e.listPath())
		var body any
		var bad []httpx.Detail
		if e.bodyOf != nil {
			body, bad = e.bodyOf(c, r, f)
		} else {
			body, bad = e.body(f)
		}
		var item T
		var err error
		if len(bad) > 0 {
			err = &apiError{Status: http.StatusBadRequest, Code: httpx.CodeValidation, Message: "request validation failed", Details: bad}
		} else {
			err = c.call(r, "POST", e.api, body, &item)
		}
		switch {
		case err != nil && back != e.listPath():
			c.apiMessage(w, r, err)
		case err != nil:
			v := c.newView(w, r, e.title, e.nav)
			v.Form = f
			if e.reshow != nil {
				v.Form = e.reshow(f)
			}
			e.render(c, w, r, v, c.fail(r, v, err))
		case e.created != nil:
			e.created(c, w, r, item)
		default:
			done(w, r, back, e.key+"-created")
		}
	}
}

func (e *entity[T]) confirmDelete(c *Console) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var item T
		err := c.call(r, "GET", e.api+"/"+pathID(r.PathValue("id")), nil, &item)
		if err != nil {
			c.apiMessage(w, r, err)
			return
		}
		id, name := e.name(item)
		back := e.listPath()
		if e.back != nil {
			back = e.back(id)
		}
		v := c.newView(w, r, "Delete "+e.what, e.nav)
		v.Data = confirmData{What: e.what, Name: name, Consequence: e.consequence,
			Action: Prefix + e.path + "/" + url.PathEscape(id) + "/delete", Back: back}
		c.render(w, 0, "confirm", v)
	}
}

func (e *entity[T]) delete(c *Console) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := c.call(r, "DELETE", e.api+"/"+pathID(r.PathValue("id")), nil, nil); err != nil {
			c.apiMessage(w, r, err)
			return
		}
		done(w, r, returnTo(r.PostForm.Get("return"), e.listPath()), e.key+"-deleted")
	}
}

// confirmData is a deletion to confirm.
type confirmData struct {
	What, Name, Consequence, Action, Back string
}

// flexList reads a list answer: the admin API's {data, pagination}, or a
// bare array (one page holding everything).
type flexList[T any] struct {
	admin.List[T]
}

func (l *flexList[T]) UnmarshalJSON(b []byte) error {
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		var items []T
		if err := json.Unmarshal(t, &items); err != nil {
			return err
		}
		l.Data = items
		l.Pagination = admin.Pagination{Page: 1, PageSize: len(items), TotalItems: len(items), TotalPages: 1}
		return nil
	}
	return json.Unmarshal(b, &l.List)
}
