package cli

import (
	"strings"
	"testing"
)

// TestInvitationUsageErrors: what the invitation, verify-email and org
// update verbs refuse before sending anything.
func TestInvitationUsageErrors(t *testing.T) {
	f := newFakeAPI(t)
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"invitation", "create", "--email", "ann@example.com"}, "--org is required"},
		{[]string{"invitation", "create", "--org", "o1"}, "--email is required"},
		{[]string{"invitation", "create", "--email", "a@example.com", "--org", "o1", "--expires-in", "30m"}, "from 1h to 720h"},
		{[]string{"invitation", "create", "--email", "a@example.com", "--org", "o1", "--expires-in", "721h"}, "from 1h to 720h"},
		{[]string{"invitation", "create", "--email", "a@example.com", "--org", "o1", "--expires-in", "7d"}, "expires-in"},
		{[]string{"invitation", "create", "--email", "a@example.com", "--org", "o1", "--expires-in", "0"}, "expires-in"},
		{[]string{"invitation", "list", "--status", "withdrawn"}, "--status must be one of pending, accepted, expired"},
		{[]string{"invitation", "delete"}, "ID"},
		{[]string{"user", "verify-email"}, "ID"},
		{[]string{"user", "verify-email", "u1", "--locale", "ko"}, "--locale must be one of en, de, fr, es, ja"},
		{[]string{"user", "verify-email", "u1", "--locale", ""}, "--locale must be one of"},
		{[]string{"invitation", "create", "--email", "a@example.com", "--org", "o1", "--locale", "de-CH"}, "--locale must be one of en, de, fr, es, ja"},
		{[]string{"org", "update", "o1"}, "nothing to update"},
		{[]string{"org", "update", "o1", "--registration", "yes"}, "--registration must be one of on, off"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			n := len(f.requests())
			r := run(t, f.env(), "", tc.args...)
			if r.code != ExitUsage || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, ExitUsage, tc.stderr)
			}
			if len(f.requests()) != n {
				t.Error("a usage error sent a request")
			}
		})
	}
}
