package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/redirect"
)

// A client's application type and web origins (docs/operators/clients.md,
// docs/openapi/admin.json).
// The rules of what a redirect URI or an origin may be are
// internal/redirect's, which the authorization and token endpoints and
// the CORS answers read too; this file only says how the admin API takes
// and shows them.

// maxWebOrigins bounds a client's web_origins: as many as its redirect
// URIs may be.
const maxWebOrigins = maxRedirectURIs

// clientAppsFeature is what the state-format gate's 409 names when the
// cluster cannot take a native client or a client's own web origins yet
// (a rolling upgrade under way).
const clientAppsFeature = "a client with application_type native or web_origins of its own (browser and native apps)"

// optOrigins is the web_origins of a POST or PATCH body, which has three
// meanings beside a list: absent (Given false; a PATCH keeps the stored
// value, a POST takes the default), null (Null; the default, which
// follows the redirect URIs) and a list, [] included (none at all).
type optOrigins struct {
	Given bool
	Null  bool
	List  []string
}

// UnmarshalJSON takes null or an array of strings. encoding/json calls it
// for null too, since the field is a value, not a pointer.
func (o *optOrigins) UnmarshalJSON(b []byte) error {
	o.Given = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		o.Null = true
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		// The decoder adds the field's name ("web_origins").
		return &json.UnmarshalTypeError{Value: "value", Type: reflect.TypeFor[[]string]()}
	}
	o.List = list
	if o.List == nil {
		o.List = []string{}
	}
	return nil
}

// mergeApps copies the body's application_type, when it is one (checkApps
// refuses any other), and web_origins onto c: "web" is stored as ""
// (fsm.Client.ApplicationType), null web origins go back to the default,
// a list (checked later) is set.
func (b *clientBody) mergeApps(c *fsm.Client) {
	switch deref(b.ApplicationType) {
	case redirect.Web:
		c.ApplicationType = ""
	case redirect.Native:
		c.ApplicationType = fsm.ApplicationNative
	}
	switch {
	case !b.WebOrigins.Given:
	case b.WebOrigins.Null:
		c.WebOrigins, c.WebOriginsSet = nil, false
	default:
		c.WebOrigins, c.WebOriginsSet = slices.Clone(b.WebOrigins.List), true
	}
}

// checkApps checks the application type b gives and c's, and c's web
// origins, and normalizes the origins (as a browser writes them, each once); checkClient has
// checked c's type. A native client is public: an app on a person's
// device cannot keep a secret (RFC 8252 8.5). Only a public client lists
// origins: a confidential client's code exchange carries its secret, which
// no page may hold, so its browser calls go through its own server.
func (p *problems) checkApps(b *clientBody, c *fsm.Client) {
	switch {
	case b.ApplicationType != nil && *b.ApplicationType != redirect.Web && *b.ApplicationType != redirect.Native:
		p.add("application_type", codeInvalid, "must be one of %s, %s", redirect.Web, redirect.Native)
	case c.ApplicationType == fsm.ApplicationNative && c.Type == fsm.ClientConfidential:
		p.add("application_type", codeInvalid, "a native client must be of type public: an app on a person's device cannot keep a secret (RFC 8252 8.5)")
	}
	if !c.WebOriginsSet {
		c.WebOrigins = nil
		return
	}
	switch {
	case len(c.WebOrigins) > maxWebOrigins:
		p.add("web_origins", codeTooMany, "must hold at most %d origins", maxWebOrigins)
		return
	case len(c.WebOrigins) > 0 && c.Type != fsm.ClientPublic:
		p.add("web_origins", codeInvalid, "only a public client may list web origins: a confidential client's code exchange carries its secret, which no page may hold, so its pages call the provider through its own server (give [] or null)")
		return
	}
	var out []string
	for i, s := range c.WebOrigins {
		o, err := redirect.CheckOrigin(s)
		if err != nil {
			p.add(fmt.Sprintf("web_origins[%d]", i), codeInvalid, "%s", err)
			continue
		}
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	c.WebOrigins = out
}

// effectiveOrigins is c's web_origins as the API shows them and the CORS
// answers use them: its own when its registration names them, else the
// default that follows its redirect URIs.
func effectiveOrigins(c fsm.Client) []string {
	return redirect.Origins(c.Type == fsm.ClientPublic, c.WebOriginsSet, c.WebOrigins, c.RedirectURIs)
}

// applicationType is c's application_type as the API shows it.
func applicationType(c fsm.Client) string {
	if c.ApplicationType == "" {
		return redirect.Web
	}
	return c.ApplicationType
}

// nameAppsFeature makes the state-format gate's 409 for a client say what
// needs the upgrade in the API's words rather than the record's.
func nameAppsFeature(cmd fsm.Command) fsm.Command {
	if cmd.Feature != "" {
		cmd.Feature = clientAppsFeature
	}
	return cmd
}
