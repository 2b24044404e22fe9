package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/internal/httpx"
)

// Administrators (grants) and API keys: the admin API's /admins and
// /api-keys. Neither has a GET of one record, so a deletion is a button in
// its row (CSRF like every form) without a confirmation page.

// grant is one of the admin API's grants (GET /admins).
type grant struct {
	ID        string    `json:"id"`
	UserID    string    `json:"user_id"`
	Role      string    `json:"role"`
	OrgID     string    `json:"organization_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// apiKey is one of the admin API's API keys; Key only in the answer to
// its creation.
type apiKey struct {
	ID        string      `json:"id"`
	Name      string      `json:"name"`
	Role      string      `json:"role"`
	OrgID     string      `json:"organization_id,omitempty"`
	ExpiresAt time.Time   `json:"expires_at"`
	CreatedAt time.Time   `json:"created_at"`
	CreatedBy admin.Maker `json:"created_by"`
	Key       string      `json:"key,omitempty"`
}

// roles are the roles a grant or an API key carries, in the forms' order.
var roles = []string{admin.RoleAdmin, admin.RoleOrgAdmin, admin.RoleAuditor}

// listAllGrants reads the grants (the first maxChoices).
func listAllGrants(c *Console, r *http.Request) ([]grant, error) {
	var list flexList[grant]
	if err := c.call(r, "GET", "/admins?page_size="+strconv.Itoa(maxChoices), nil, &list); err != nil {
		return nil, err
	}
	return list.Data, nil
}

// ----- administrators -----

type grantRow struct {
	grant
	Person, OrgName string
}

type grantsData struct {
	Rows  []grantRow
	Pager pager
	Orgs  []admin.Org
	Roles []string
}

func grantEntity() *entity[grant] {
	return &entity[grant]{api: "/admins", path: "admins", nav: "admins", title: "Administrators", page: "admins", key: "grant",
		defaults: url.Values{"role": {admin.RoleAdmin}},
		data: func(c *Console, r *http.Request, gs []grant, pg pager) any {
			names := c.names(r)
			d := grantsData{Orgs: c.firstOrgs(r), Pager: pg, Roles: roles}
			for _, g := range gs {
				row := grantRow{grant: g, Person: names.user(g.UserID)}
				if g.OrgID != "" {
					row.OrgName = names.org(g.OrgID)
				}
				d.Rows = append(d.Rows, row)
			}
			return d
		},
		bodyOf: grantBody,
	}
}

// grantBody turns the form into POST /admins's body. The person is named
// by id or by email; an email is looked up first (GET /users?email=).
func grantBody(c *Console, r *http.Request, f url.Values) (any, []httpx.Detail) {
	who := strings.TrimSpace(f.Get("user"))
	body := map[string]string{"user_id": who, "role": f.Get("role")}
	if o := f.Get("organization_id"); o != "" {
		body["organization_id"] = o
	}
	if strings.Contains(who, "@") {
		var list flexList[admin.User]
		if err := c.call(r, "GET", "/users?email="+url.QueryEscape(who), nil, &list); err != nil {
			return nil, []httpx.Detail{{Field: "user_id", Message: "the email could not be looked up", Code: "invalid"}}
		}
		if len(list.Data) == 0 {
			return nil, []httpx.Detail{{Field: "user_id", Message: "no person has this email", Code: "not_found"}}
		}
		body["user_id"] = list.Data[0].ID
	}
	return body, nil
}

// ----- API keys -----

type apiKeyRow struct {
	apiKey
	OrgName string
	MadeBy  string // who made the key: a person's address, a key's name, or the token
	Expired bool
}

// madeBy names k's maker for a person: a person by their address, a key
// by its name when it is on the page (else its id), and the break-glass
// token, which also stands for every key made before makers were
// recorded.
func madeBy(names *nameCache, k apiKey, page []apiKey) string {
	switch k.CreatedBy.Kind {
	case admin.CredentialPerson:
		return names.user(k.CreatedBy.Sub)
	case admin.CredentialAPIKey:
		for _, o := range page {
			if o.ID == k.CreatedBy.ID {
				return "API key " + o.Name
			}
		}
		return "API key " + k.CreatedBy.ID
	}
	return "the break-glass token"
}

type apiKeysData struct {
	Keys   []apiKeyRow
	Pager  pager
	Orgs   []admin.Org
	Roles  []string
	Expiry []expiryChoice
}

// expiryChoice is one lifetime the create form offers (the API takes at
// most a year).
type expiryChoice struct {
	Seconds int64
	Label   string
}

var expiryChoices = []expiryChoice{
	{7 * 86400, "7 days"},
	{30 * 86400, "30 days"},
	{90 * 86400, "90 days"},
	{365 * 86400, "1 year"},
}

func apiKeyEntity() *entity[apiKey] {
	return &entity[apiKey]{api: "/api-keys", path: "api-keys", nav: "apikeys", title: "API keys", page: "apikeys", key: "apikey",
		defaults: url.Values{"role": {admin.RoleAuditor}, "expires_in": {strconv.Itoa(90 * 86400)}},
		data: func(c *Console, r *http.Request, ks []apiKey, pg pager) any {
			names := c.names(r)
			now := c.now()
			d := apiKeysData{Orgs: c.firstOrgs(r), Pager: pg, Roles: roles, Expiry: expiryChoices}
			for _, k := range ks {
				row := apiKeyRow{apiKey: k, MadeBy: madeBy(names, k, ks), Expired: !k.ExpiresAt.IsZero() && !now.Before(k.ExpiresAt)}
				if k.OrgID != "" {
					row.OrgName = names.org(k.OrgID)
				}
				d.Keys = append(d.Keys, row)
			}
			return d
		},
		body: apiKeyBody,
		created: func(c *Console, w http.ResponseWriter, r *http.Request, k apiKey) {
			v := c.newView(w, r, "API key created", "apikeys")
			row := apiKeyRow{apiKey: k}
			if k.OrgID != "" {
				row.OrgName = c.names(r).org(k.OrgID)
			}
			v.Data = row
			c.render(w, http.StatusCreated, "apikey_created", v)
		},
	}
}

// apiKeyBody turns the form into POST /api-keys's body.
func apiKeyBody(f url.Values) (any, []httpx.Detail) {
	body := map[string]any{"name": strings.TrimSpace(f.Get("name")), "role": f.Get("role")}
	if o := f.Get("organization_id"); o != "" {
		body["organization_id"] = o
	}
	n, err := strconv.ParseInt(f.Get("expires_in"), 10, 64)
	if err != nil {
		return nil, []httpx.Detail{{Field: "expires_in", Message: "choose how long the key works", Code: "invalid"}}
	}
	body["expires_in"] = n
	return body, nil
}
