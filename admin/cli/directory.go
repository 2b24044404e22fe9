package cli

import (
	"flag"
	"net/http"
	"os"
	"strings"
)

// directoryFlags are the flags of directory create and update; only the
// ones given are sent.
type directoryFlags struct {
	name, url, caFile, bindDN, bindPassword            string
	userBase, userFilter, idAttr, emailAttr, phoneAttr string
	groupBase, groupFilter, syncInterval               string
	startTLS, insecure, pwStdin                        bool
	orgs                                               listFlag
}

func (d *directoryFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.name, "name", "", "`name` shown in the console")
	fs.StringVar(&d.url, "url", "", "ldaps://host:636, or ldap://host:389 with --start-tls")
	fs.BoolVar(&d.startTLS, "start-tls", false, "StartTLS on an ldap:// URL")
	fs.StringVar(&d.caFile, "ca-file", "", "PEM `file` of the CA that signs the server's certificate (default: the system's roots)")
	fs.BoolVar(&d.insecure, "insecure", false, "allow ldap:// without StartTLS: passwords cross the network in the clear")
	fs.StringVar(&d.bindDN, "bind-dn", "", "`DN` of the search account")
	fs.StringVar(&d.bindPassword, "bind-password", "", "the search account's `password` (visible in the process list; prefer --bind-password-stdin)")
	fs.BoolVar(&d.pwStdin, "bind-password-stdin", false, "read the search account's password from standard input")
	fs.StringVar(&d.userBase, "user-base", "", "`DN` under which people are found")
	fs.StringVar(&d.userFilter, "user-filter", "", "`filter` finding a person by the address typed, e.g. (mail=%s)")
	fs.StringVar(&d.idAttr, "id-attribute", "", "stable id `attribute` that becomes the person's sub (entryUUID, objectGUID)")
	fs.StringVar(&d.emailAttr, "email-attribute", "", "address `attribute` (default mail)")
	fs.StringVar(&d.phoneAttr, "phone-attribute", "", "phone `attribute`, e.g. telephoneNumber")
	fs.StringVar(&d.groupBase, "group-base", "", "`DN` under which groups are found")
	fs.StringVar(&d.groupFilter, "group-filter", "", "`filter` finding a person's groups by their DN, e.g. (member=%s)")
	fs.Var(&d.orgs, "org", "`GROUP_DN=ORG_ID`: members of the group are members of the organization; repeat for several")
	fs.StringVar(&d.syncInterval, "sync-interval", "", "how often the leader re-reads the directory's people, e.g. 15m")
}

func (d *directoryFlags) body(in *inv) (map[string]any, error) {
	b := map[string]any{}
	for flagName, v := range map[string]struct {
		field string
		val   any
	}{
		"name": {"name", d.name}, "url": {"url", d.url}, "start-tls": {"start_tls", d.startTLS}, "insecure": {"insecure", d.insecure},
		"bind-dn": {"bind_dn", d.bindDN}, "user-base": {"user_base", d.userBase}, "user-filter": {"user_filter", d.userFilter},
		"id-attribute": {"id_attribute", d.idAttr}, "email-attribute": {"email_attribute", d.emailAttr},
		"phone-attribute": {"phone_attribute", d.phoneAttr}, "group-base": {"group_base", d.groupBase},
		"group-filter": {"group_filter", d.groupFilter}, "sync-interval": {"sync_interval", d.syncInterval},
	} {
		if in.given(flagName) {
			b[v.field] = v.val
		}
	}
	if in.given("ca-file") {
		pem, err := os.ReadFile(d.caFile)
		if err != nil {
			return nil, errUsage("--ca-file: %v", err)
		}
		b["ca_pem"] = string(pem)
	}
	switch {
	case in.given("bind-password") && d.pwStdin:
		return nil, errUsage("give --bind-password or --bind-password-stdin, not both")
	case in.given("bind-password"):
		b["bind_password"] = d.bindPassword
	case d.pwStdin:
		pw, err := readPassword(in.stdin)
		if err != nil {
			return nil, err
		}
		b["bind_password"] = pw
	}
	if in.given("org") {
		orgs := []map[string]string{}
		for _, v := range d.orgs.list() {
			i := strings.LastIndex(v, "=")
			if i <= 0 || i == len(v)-1 {
				return nil, errUsage("--org %q: want GROUP_DN=ORG_ID", v)
			}
			orgs = append(orgs, map[string]string{"group_dn": v[:i], "organization_id": v[i+1:]})
		}
		b["organizations"] = orgs
	}
	return b, nil
}

func directoryCreate(fs *flag.FlagSet) func(in *inv) (*request, error) {
	var d directoryFlags
	d.register(fs)
	return func(in *inv) (*request, error) {
		b, err := d.body(in)
		if err != nil {
			return nil, err
		}
		return &request{method: http.MethodPost, path: "/directories", body: b, show: directoryTable.one}, nil
	}
}

func directoryUpdate(fs *flag.FlagSet) func(in *inv) (*request, error) {
	var d directoryFlags
	d.register(fs)
	return func(in *inv) (*request, error) {
		b, err := d.body(in)
		if err != nil {
			return nil, err
		}
		return &request{method: http.MethodPatch, path: idPath("/directories", in.args[0]), body: b, show: directoryTable.one}, nil
	}
}

func directoryList(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(in *inv) (*request, error) {
		return &request{method: http.MethodGet, path: "/directories", show: directoryTable.list}, nil
	}
}
