package cli

import (
	"strings"
	"testing"
)

func TestOutput(t *testing.T) {
	const uid = "0b1e6c3a-8d2f-4f7e-9a51-3c2d1e0f9a8b" // the user verbs take an address or a UUID
	tests := []struct {
		name       string
		args       []string
		status     int
		body       string
		wantStdout string
		wantStderr string // exact; "" = nothing
	}{
		{name: "org list table and footer", args: []string{"org", "list"},
			body: `{"data":[{"id":"0b1e","slug":"acme","name":"Acme Inc.","status":"active","registration":{"enabled":true,"email_domains":["acme.example","xn--bcher-kva.example"]}},
				{"id":"77aa","slug":"globex","name":"Globex","status":"deleted","registration":{"enabled":false,"email_domains":[]}},
				{"id":"99cc","slug":"old","name":"Old","status":"active"}],
				"pagination":{"page":1,"page_size":3,"total_items":45,"total_pages":15,"has_next":true,"has_previous":false}}`,
			wantStdout: "" +
				"ID    SLUG    NAME       STATUS   REGISTRATION\n" +
				"0b1e  acme    Acme Inc.  active   on (acme.example,xn--bcher-kva.example)\n" +
				"77aa  globex  Globex     deleted  off\n" +
				"99cc  old     Old        active   -\n" +
				"page 1/15, 45 items (next: --page 2)\n"},
		{name: "empty list", args: []string{"user", "list"},
			body:       `{"data":[],"pagination":{"page":1,"page_size":20,"total_items":0,"total_pages":0,"has_next":false,"has_previous":false}}`,
			wantStdout: "no users\npage 1/1, 0 items\n"},
		{name: "org create row", args: []string{"org", "create", "--slug", "acme", "--name", "Acme"}, status: 201,
			body:       `{"id":"0b1e","slug":"acme","name":"Acme","status":"active","registration":{"enabled":false,"email_domains":["acme.example"]}}`,
			wantStdout: "ID    SLUG  NAME  STATUS  REGISTRATION\n0b1e  acme  Acme  active  off (acme.example)\n"},
		{name: "invitation list", args: []string{"invitation", "list"},
			body: `{"data":[{"id":"i1","email":"ann@example.com","organization_id":"o1","status":"accepted","created_at":"2025-01-01T00:00:00Z",
				"expires_at":"2025-01-08T00:00:00Z","accepted_at":"2025-01-02T00:00:00Z","accepted_by":"u1"},
				{"id":"i2","email":"bob@example.com","organization_id":"o1","status":"pending","created_at":"2025-01-01T00:00:00Z","expires_at":"2025-01-08T00:00:00Z"}],
				"pagination":{"page":1,"page_size":20,"total_items":2,"total_pages":1,"has_next":false,"has_previous":false}}`,
			wantStdout: "" +
				"ID  EMAIL            ORG  STATUS    EXPIRES_AT            ACCEPTED_AT\n" +
				"i1  ann@example.com  o1   accepted  2025-01-08T00:00:00Z  2025-01-02T00:00:00Z\n" +
				"i2  bob@example.com  o1   pending   2025-01-08T00:00:00Z  -\n" +
				"page 1/1, 2 items\n"},
		{name: "invitation create", args: []string{"invitation", "create", "--email", "ann@example.com", "--org", "o1"}, status: 201,
			body:       `{"id":"i1","email":"ann@example.com","organization_id":"o1","status":"pending","created_at":"2025-01-01T00:00:00Z","expires_at":"2025-01-08T00:00:00Z"}`,
			wantStdout: "ID  EMAIL            ORG  STATUS   EXPIRES_AT            ACCEPTED_AT\ni1  ann@example.com  o1   pending  2025-01-08T00:00:00Z  -\n",
			wantStderr: "note: the invitation is on its way; withdraw it with: oidcd admin invitation delete ID\n"},
		{name: "invitation delete", args: []string{"invitation", "delete", "i1"}, status: 204,
			wantStdout: "withdrew invitation i1; its link no longer works\n"},
		{name: "user verify-email", args: []string{"user", "verify-email", uid}, status: 202,
			body:       `{"user_id":"u1","email":"ann@example.com","expires_at":"2025-01-02T00:00:00Z"}`,
			wantStdout: "sent a link to ann@example.com; it works until 2025-01-02T00:00:00Z\n"},
		{name: "user get", args: []string{"user", "get", uid},
			body:       `{"id":"u1","email":"ann@example.com","email_verified":true,"password_scheme":"bcrypt"}`,
			wantStdout: "ID  EMAIL            VERIFIED  PHONE  PASSWORD\nu1  ann@example.com  true      -      bcrypt\n"},
		{name: "membership list", args: []string{"membership", "list"},
			body: `{"data":[{"id":"m1","user_id":"u1","org_id":"o1","status":"suspended"}],
				"pagination":{"page":1,"page_size":20,"total_items":1,"total_pages":1,"has_next":false,"has_previous":false}}`,
			wantStdout: "ID  USER  ORG  STATUS\nm1  u1    o1   suspended\npage 1/1, 1 item\n"},
		{name: "confidential client create shows the secret once", status: 201,
			args: []string{"client", "create", "--name", "Portal", "--org", "o1", "--redirect-uri", "https://p.example/cb"},
			body: `{"client_id":"portal","name":"Portal","type":"confidential","organization_id":"o1",
				"redirect_uris":["https://p.example/cb","https://p.example/cb2"],"scopes":["openid"],"multi_organization":false,
				"organizations":[],"access_token_ttl":600,"skip_consent":false,"suspended":false,"client_secret":"s3cr3t"}`,
			wantStdout: "" +
				"client_id           portal\n" +
				"name                Portal\n" +
				"type                confidential\n" +
				"organization_id     o1\n" +
				"redirect_uris       https://p.example/cb\n" +
				"                    https://p.example/cb2\n" +
				"scopes              openid\n" +
				"multi_organization  false\n" +
				"organizations       -\n" +
				"access_token_ttl    600\n" +
				"skip_consent        false\n" +
				"suspended           false\n" +
				"\nclient_secret: s3cr3t\n",
			wantStderr: "note: the client secret is shown only this once: store it now\n"},
		{name: "confidential client create with --json", status: 201,
			args:       []string{"--json", "client", "create", "--name", "P", "--org", "o1", "--redirect-uri", "https://p.example/cb"},
			body:       `{"client_id":"p","type":"confidential","redirect_uris":["https://p.example/cb"],"client_secret":"s3cr3t"}`,
			wantStdout: "{\n  \"client_id\": \"p\",\n  \"type\": \"confidential\",\n  \"redirect_uris\": [\n    \"https://p.example/cb\"\n  ],\n  \"client_secret\": \"s3cr3t\"\n}\n",
			wantStderr: "note: the client secret is shown only this once: store it now\n"},
		{name: "public client has no secret note", status: 201,
			args:       []string{"client", "create", "--name", "P", "--org", "o1", "--redirect-uri", "https://p.example/cb", "--type", "public"},
			body:       `{"client_id":"p","name":"P","type":"public"}`,
			wantStdout: "client_id  p\nname       P\ntype       public\n"},
		{name: "client list", args: []string{"client", "list"},
			body: `{"data":[{"client_id":"p","name":"Portal","type":"public","organization_id":"o1","multi_organization":true,"suspended":false}],
				"pagination":{"page":2,"page_size":1,"total_items":2,"total_pages":2,"has_next":false,"has_previous":true}}`,
			wantStdout: "CLIENT_ID  NAME    TYPE    ORG  APP  MULTI_ORG  SUSPENDED\np          Portal  public  o1   -    true       false\npage 2/2, 2 items\n"},
		{name: "json keeps the server's order and indents", args: []string{"org", "get", "x", "--json"},
			body:       `{"id":"x","slug":"acme","name":"Acme","status":"active"}`,
			wantStdout: "{\n  \"id\": \"x\",\n  \"slug\": \"acme\",\n  \"name\": \"Acme\",\n  \"status\": \"active\"\n}\n"},
		{name: "delete", args: []string{"org", "delete", "x"}, status: 204, wantStdout: "deleted organization x\n"},
		{name: "delete with --json prints nothing", args: []string{"--json", "org", "delete", "x"}, status: 204},
		{name: "totp", args: []string{"user", "totp", uid}, status: 201,
			body:       `{"secret":"JBSWY3DPEHPK3PXP","uri":"otpauth://totp/oidcd:ann?secret=JBSWY3DPEHPK3PXP"}`,
			wantStdout: "secret  JBSWY3DPEHPK3PXP\nuri     otpauth://totp/oidcd:ann?secret=JBSWY3DPEHPK3PXP\n",
			wantStderr: "note: the TOTP secret is shown only this once: add it to the authenticator app now\n"},
		{name: "recovery codes", args: []string{"user", "recovery-codes", uid}, status: 201,
			body:       `{"codes":["aaaa-1111","bbbb-2222"]}`,
			wantStdout: "aaaa-1111\nbbbb-2222\n",
			wantStderr: "note: these recovery codes are shown only this once and replace any earlier ones; each works once\n"},
		{name: "keys list", args: []string{"keys", "list"},
			body: `{"data":[{"kid":"k2","state":"next","created_at":"2025-01-02T00:00:00Z","activates_at":"2025-01-02T01:00:00Z"},
				{"kid":"k1","state":"active","created_at":"2025-01-01T00:00:00Z"}]}`,
			wantStdout: "" +
				"KID  STATE   CREATED_AT            ACTIVATES_AT          RETIRED_AT\n" +
				"k2   next    2025-01-02T00:00:00Z  2025-01-02T01:00:00Z  -\n" +
				"k1   active  2025-01-01T00:00:00Z  -                     -\n"},
		{name: "keys rotate", args: []string{"keys", "rotate", "--immediate"}, status: 201,
			body:       `{"kid":"k3","state":"active","activates_at":"2025-01-03T00:00:00Z"}`,
			wantStdout: "KID  STATE   CREATED_AT  ACTIVATES_AT          RETIRED_AT\nk3   active  -           2025-01-03T00:00:00Z  -\n"},
		{name: "cluster status", args: []string{"cluster", "status"},
			body: `{"leader":"n1","members":[
				{"id":"n1","raft_addr":"127.0.0.1:8300","gossip_addr":"127.0.0.1:8301","http_addr":"127.0.0.1:8080","state":"alive","voter":true,"version":"0.4.0","state_format":2},
				{"id":"n2","raft_addr":"127.0.0.1:8310","gossip_addr":"127.0.0.1:8311","http_addr":"127.0.0.1:8081","state":"alive","voter":false,"version":"0.4.0","state_format":2}],
				"state_format":2,"mixed":false}`,
			wantStdout: "" +
				"leader: n1\n" +
				"state format: 2\n" +
				"ID  RAFT_ADDR       GOSSIP_ADDR     HTTP_ADDR       STATE  VOTER  LEADER  APPLIED  LAG  CONTACT_MS  VERSION  FORMAT\n" +
				"n1  127.0.0.1:8300  127.0.0.1:8301  127.0.0.1:8080  alive  true   true    -        -    -           0.4.0    2\n" +
				"n2  127.0.0.1:8310  127.0.0.1:8311  127.0.0.1:8081  alive  false  false   -        -    -           0.4.0    2\n"},
		{name: "cluster status, mixed", args: []string{"cluster", "status"},
			body: `{"leader":"n1","members":[
				{"id":"n1","raft_addr":"127.0.0.1:8300","state":"alive","voter":true,"version":"0.4.0","state_format":2},
				{"id":"n2","raft_addr":"127.0.0.1:8310","state":"alive","voter":true,"version":"0.3.0","state_format":1}],
				"state_format":1,"mixed":true}`,
			wantStdout: "" +
				"leader: n1\n" +
				"state format: 1, mixed versions (a rolling upgrade is under way)\n" +
				"ID  RAFT_ADDR       GOSSIP_ADDR  HTTP_ADDR  STATE  VOTER  LEADER  APPLIED  LAG  CONTACT_MS  VERSION  FORMAT\n" +
				"n1  127.0.0.1:8300  -            -          alive  true   true    -        -    -           0.4.0    2\n" +
				"n2  127.0.0.1:8310  -            -          alive  true   false   -        -    -           0.3.0    1\n" +
				"\n" +
				"Mixed versions (n1 0.4.0, n2 0.3.0): a rolling upgrade is under way. The\n" +
				"cluster runs state format 1: writes that need state format 2 wait until\n" +
				"every node runs it (they are refused with 409 CONFLICT until then; upgrade\n" +
				"n2). Sign-ins, tokens and every other write go on as usual.\n"},
		{name: "cluster status, mixed patch releases", args: []string{"cluster", "status"},
			body: `{"leader":"n1","members":[
				{"id":"n1","state":"alive","voter":true,"version":"0.4.1","state_format":2},
				{"id":"n2","state":"alive","voter":true,"version":"0.4.0","state_format":2}],
				"state_format":2,"mixed":true}`,
			wantStdout: "" +
				"leader: n1\n" +
				"state format: 2, mixed versions (a rolling upgrade is under way)\n" +
				"ID  RAFT_ADDR  GOSSIP_ADDR  HTTP_ADDR  STATE  VOTER  LEADER  APPLIED  LAG  CONTACT_MS  VERSION  FORMAT\n" +
				"n1  -          -            -          alive  true   true    -        -    -           0.4.1    2\n" +
				"n2  -          -            -          alive  true   false   -        -    -           0.4.0    2\n" +
				"\n" +
				"Mixed versions (n1 0.4.1, n2 0.4.0): a rolling upgrade is under way. Every\n" +
				"node applies the cluster's state format 2: no write waits.\n"},
		{name: "cluster without leader", args: []string{"cluster", "status"}, body: `{"leader":"","members":[]}`,
			wantStdout: "leader: none\nno members\n"},
		{name: "control characters are neutralised", args: []string{"org", "get", "x"},
			body:       `{"id":"x","slug":"a\u001b[31m","name":"tab\there","status":"active"}`,
			wantStdout: "ID  SLUG    NAME      STATUS  REGISTRATION\nx   a [31m  tab here  active  -\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			status := tc.status
			if status == 0 {
				status = 200
			}
			f.answer(status, strings.TrimSpace(tc.body))
			r := run(t, f.env(), "", tc.args...)
			if r.code != ExitOK {
				t.Fatalf("exit %d, want 0; stderr %q", r.code, r.stderr)
			}
			if r.stdout != tc.wantStdout {
				t.Errorf("stdout:\ngot  %q\nwant %q", r.stdout, tc.wantStdout)
			}
			if r.stderr != tc.wantStderr {
				t.Errorf("stderr: got %q, want %q", r.stderr, tc.wantStderr)
			}
		})
	}
}
