package cli

import (
	"regexp"
	"strings"
	"testing"
)

var spaces = regexp.MustCompile(` {2,}`)

const healthyStatus = `{"node":{"id":"n1","version":"v1.2","state":"leader","commit_index":42,"applied_index":42},
 "leader":"n1",
 "members":[
  {"id":"n1","raft_addr":"127.0.0.1:8300","gossip_addr":"127.0.0.1:8301","http_addr":"127.0.0.1:8080","state":"leader","voter":true,"applied_index":42,"applied_lag":0,"last_contact_ms":0,"version":"0.4.0","state_format":2},
  {"id":"n2","raft_addr":"127.0.0.1:8310","gossip_addr":"127.0.0.1:8311","http_addr":"127.0.0.1:8081","state":"failed","voter":true,"applied_index":30,"applied_lag":12,"last_contact_ms":61000,"version":"0.4.0","state_format":2}],
 "state_format":2,"mixed":false,
 "keys":[{"kid":"k1","state":"active","created_at":"2025-01-01T00:00:00Z"},{"kid":"k2","state":"next","created_at":"2025-01-02T00:00:00Z","activates_at":"2025-01-02T00:10:00Z"}],
 "deliveries":{"pending":1,"more":false,"oldest":[{"id":"00000000000000000007-0","client_id":"portal","uri":"https://p.example/bc","cause":"logout","created_at":"2025-01-01T00:00:00Z","attempts":3,"next_attempt_at":"2025-01-01T00:01:00Z","last_error":"HTTP 500"}]}}`

// mixedStatus is a cluster halfway through a rolling upgrade from 0.3.0.
const mixedStatus = `{"node":{"id":"n1","version":"0.4.0","state":"leader","commit_index":9,"applied_index":9},"leader":"n1",
 "members":[
  {"id":"n1","raft_addr":"127.0.0.1:8300","state":"leader","voter":true,"version":"0.4.0","state_format":2},
  {"id":"n2","raft_addr":"127.0.0.1:8310","state":"follower","voter":true,"version":"0.3.0","state_format":1},
  {"id":"n3","raft_addr":"127.0.0.1:8320","state":"follower","voter":true,"version":"0.3.0","state_format":1}],
 "state_format":1,"mixed":true,"keys":[],"deliveries":{"pending":0,"more":false,"oldest":[]}}`

const leaderlessStatus = `{"node":{"id":"n2","state":"candidate","commit_index":7,"applied_index":7},"leader":"",
 "members":[{"id":"n2","raft_addr":"127.0.0.1:8310","state":"candidate","voter":true}],"keys":[],"deliveries":{"pending":0,"more":false,"oldest":[]}}`

func TestStatusCommand(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		status     int
		body       string
		want       int
		wantStdout []string
		wantStderr string
	}{
		{name: "healthy", args: []string{"status"}, body: healthyStatus, want: ExitOK, wantStdout: []string{
			"node n1 (leader), version v1.2\n",
			"applied index 42 (commit index 42)\n",
			"leader n1\n",
			"members 2 (2 voters, 1 leader or follower)\nstate format 2\n",
			"signing keys 1 active, 1 next, 0 retired\n",
			"pending back-channel deliveries 1\n",
			"\nMembers\nID RAFT_ADDR GOSSIP_ADDR HTTP_ADDR STATE VOTER LEADER APPLIED LAG CONTACT_MS VERSION FORMAT\n",
			"n1 127.0.0.1:8300 127.0.0.1:8301 127.0.0.1:8080 leader true true 42 0 0 0.4.0 2\n",
			"n2 127.0.0.1:8310 127.0.0.1:8311 127.0.0.1:8081 failed true false 30 12 61000 0.4.0 2\n",
			"\nSigning keys\nKID STATE CREATED_AT",
			"\nOldest pending deliveries (1 shown)\n",
			"00000000000000000007-0 portal https://p.example/bc logout 3 2025-01-01T00:01:00Z HTTP 500\n",
		}},
		{name: "mixed versions", args: []string{"status"}, body: mixedStatus, want: ExitOK, wantStdout: []string{
			"state format 1, mixed versions (a rolling upgrade is under way)\n",
			"n2 127.0.0.1:8310 - - follower true false - - - 0.3.0 1\n",
			"\nMixed versions (n1 0.4.0, n2 0.3.0, n3 0.3.0): a rolling upgrade is under\n" +
				"way. The cluster runs state format 1: writes that need state format 2 wait\n" +
				"until every node runs it (they are refused with 409 CONFLICT until then;\n" +
				"upgrade n2, n3). Sign-ins, tokens and every other write go on as usual.\n",
		}},
		{name: "a server before the gate says no format", args: []string{"status"},
			body: `{"node":{"id":"n1","state":"leader"},"leader":"n1","members":[{"id":"n1","state":"leader","voter":true}],"keys":[],"deliveries":{"pending":0,"more":false,"oldest":[]}}`,
			want: ExitOK, wantStdout: []string{"members 1 (1 voters, 1 leader or follower)\nsigning keys", "n1 - - - leader true true - - - - -\n"}},
		{name: "no leader exits 5", args: []string{"status"}, body: leaderlessStatus, want: ExitNoLeader, wantStdout: []string{
			"leader none\n", "n2 (candidate)", "This node knows no leader"}},
		{name: "json, no leader, still exits 5", args: []string{"status", "--json"}, body: leaderlessStatus, want: ExitNoLeader,
			wantStdout: []string{"{\n \"node\": {\n", "\"leader\": \"\""}},
		{name: "json, healthy", args: []string{"--json", "status"}, body: healthyStatus, want: ExitOK, wantStdout: []string{"\"leader\": \"n1\""}},
		{name: "the capped count says so", args: []string{"status"},
			body: `{"node":{"id":"n1","state":"leader"},"leader":"n1","members":[],"keys":[],"deliveries":{"pending":10000,"more":true,"oldest":[]}}`,
			want: ExitOK, wantStdout: []string{"pending back-channel deliveries 10000 or more\n"}},
		{name: "server error", args: []string{"status"}, status: 503,
			body: `{"error":{"code":"SERVICE_UNAVAILABLE","message":"cluster unavailable, try again","correlation_id":"c","timestamp":"t"}}`,
			want: ExitServerError, wantStderr: "error: SERVICE_UNAVAILABLE: cluster unavailable, try again (correlation id c)\n"},
		{name: "unauthorized", args: []string{"status"}, status: 401,
			body: `{"error":{"code":"UNAUTHORIZED","message":"invalid admin token","correlation_id":"c","timestamp":"t"}}`, want: ExitAuth},
		{name: "not JSON", args: []string{"status"}, body: "<html>", want: ExitServerError},
		{name: "no arguments taken", args: []string{"status", "extra"}, want: ExitUsage, wantStderr: "error: status takes no arguments, got \"extra\"\n"},
		{name: "unknown flag", args: []string{"status", "--bogus"}, want: ExitUsage},
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
			if r.code != tc.want {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", r.code, tc.want, r.stdout, r.stderr)
			}
			// Column widths are tabwriter's business: compare with runs of
			// spaces collapsed.
			stdout := spaces.ReplaceAllString(r.stdout, " ")
			for _, w := range tc.wantStdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
				}
			}
			if tc.wantStderr != "" && !strings.HasPrefix(r.stderr, tc.wantStderr) {
				t.Errorf("stderr: got %q, want it to begin with %q", r.stderr, tc.wantStderr)
			}
			if tc.want == ExitUsage {
				if n := len(f.requests()); n != 0 {
					t.Errorf("a usage error sent %d requests", n)
				}
				return
			}
			req := f.only(t)
			if req.Method != "GET" || req.Path != "/admin/v1/status" || req.Body != "" {
				t.Errorf("request: got %s %s %q, want GET /admin/v1/status without a body", req.Method, req.Path, req.Body)
			}
		})
	}
}

func TestStatusHelp(t *testing.T) {
	for _, args := range [][]string{{"status", "-h"}, {"status", "help"}, {"help", "status"}} {
		r := run(t, nil, "", args...)
		if r.code != ExitOK {
			t.Fatalf("%v: exit %d; stderr %q", args, r.code, r.stderr)
		}
		for _, w := range []string{"Usage: oidcd admin status [global flags]", "until oidcd admin status", "  5  status only"} {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%v: help lacks %q:\n%s", args, w, r.stdout)
			}
		}
	}
	r := run(t, nil, "", "help")
	if !strings.Contains(r.stdout, "\n  status  ") && !strings.Contains(r.stdout, "\n  status ") {
		t.Errorf("main help does not list status:\n%s", r.stdout)
	}
}
