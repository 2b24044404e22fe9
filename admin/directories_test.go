package admin

import (
	"strings"
	"testing"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/kek"
)

func TestDirectories(t *testing.T) {
	e := newEnv(t)
	org := e.createOrg("corp")
	const path = "/admin/v1/directories"
	good := `{"name":"Corp AD","url":"ldaps://dc1.corp.example:636","bind_dn":"cn=svc,dc=corp,dc=example","bind_password":"s3cret-bind",
		"user_base":"dc=corp,dc=example","user_filter":"(userPrincipalName=%s)","id_attribute":"objectGUID",
		"group_base":"dc=corp,dc=example","group_filter":"(member=%s)","sync_interval":"5m",
		"organizations":[{"group_dn":"cn=staff,dc=corp,dc=example","organization_id":"` + org.ID + `"}]}`
	bad := func(name, body, field, code string) tc {
		return tc{name: name, method: "POST", path: path, body: body, status: 400, code: httpx.CodeValidation, field: field, dcode: code}
	}
	e.run(t, []tc{
		bad("plain ldap", strings.Replace(good, "ldaps://dc1.corp.example:636", "ldap://dc1:389", 1), "url", codeInvalid),
		bad("no password", strings.Replace(good, `"bind_password":"s3cret-bind",`, "", 1), "bind_password", codeRequired),
		bad("filter without %s", strings.Replace(good, "(userPrincipalName=%s)", "(uid=x)", 1), "user_filter", codeInvalid),
		bad("interval", strings.Replace(good, `"5m"`, `"soon"`, 1), "sync_interval", codeOutOfRange),
		bad("org not a uuid", strings.Replace(good, org.ID, "corp", 1), "organizations[0].organization_id", codeInvalidUUID),
		{name: "unknown org", method: "POST", path: path, body: strings.Replace(good, org.ID, unknownID, 1), status: 422, code: httpx.CodeValidation},
	})
	d := decodeAs[Directory](t, e.must(201, "POST", path, good))
	if !d.BindPasswordSet || d.SyncInterval != "5m0s" || d.EmailAttribute != "mail" || len(d.Organizations) != 1 {
		t.Fatalf("created: %+v", d)
	}
	for _, w := range []string{
		e.must(200, "GET", path+"/"+d.ID, "").Body.String(),
		e.must(200, "GET", path, "").Body.String(),
	} {
		if strings.Contains(w, "s3cret-bind") {
			t.Fatalf("the bind password is shown: %s", w)
		}
	}
	stored, _ := e.state.Directory(d.ID)
	if pw, err := (*kek.KEK)(nil).Open(stored.BindPassword, fsm.DirectoryAAD(d.ID)); err != nil || string(pw) != "s3cret-bind" {
		t.Fatalf("stored password: %q %v", pw, err)
	}
	got := decodeAs[Directory](t, e.must(200, "PATCH", path+"/"+d.ID, `{"name":"Corp","start_tls":false,"url":"ldap://dc1:389","insecure":true}`))
	if got.Name != "Corp" || !got.Insecure || !got.BindPasswordSet {
		t.Fatalf("patched: %+v", got)
	}
	if after, _ := e.state.Directory(d.ID); string(after.BindPassword) != string(stored.BindPassword) {
		t.Fatal("a PATCH without bind_password changed it")
	}
	e.must(400, "PATCH", path+"/"+d.ID, `{"bind_password":""}`)
	e.must(204, "DELETE", path+"/"+d.ID, "")
	e.must(404, "GET", path+"/"+d.ID, "")
}
