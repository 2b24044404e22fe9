package node_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/directory"
	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/internal/testkit/ldaptest"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// The people of the test directory, their passwords and groups.
func directoryPeople() string {
	return ldaptest.Person("ann", "ann@corp.example", "ann-directory-pw") +
		ldaptest.Person("bob", "bob@corp.example", "bob-directory-pw") +
		ldaptest.Person("carol", "carol@corp.example", "carol-directory-pw") +
		ldaptest.Group("staff", "ann", "bob", "carol") +
		ldaptest.Group("admins", "ann")
}

// registerDirectory registers s through the admin API: LDAPS verified
// against s's CA, staff -> orgA, admins -> orgB, a sync every second.
func registerDirectory(t testing.TB, c *testcluster.Cluster, s *ldaptest.Server, w world) string {
	t.Helper()
	var d map[string]any
	resp := do(t, c, "POST", "/admin/v1/directories", testcluster.AdminToken, map[string]any{
		"name": "Corp", "url": s.LDAPSURL(), "ca_pem": s.CAPEM,
		"bind_dn": ldaptest.AdminDN, "bind_password": ldaptest.AdminPassword,
		"user_base": "ou=people," + ldaptest.Base, "user_filter": "(&(objectClass=inetOrgPerson)(mail=%s))",
		"id_attribute": "entryUUID", "email_attribute": "mail",
		"group_base": "ou=groups," + ldaptest.Base, "group_filter": "(member=%s)",
		"organizations": []map[string]string{
			{"group_dn": ldaptest.GroupDN("staff"), "organization_id": w.orgA},
			{"group_dn": ldaptest.GroupDN("admins"), "organization_id": w.orgB},
		},
		"sync_interval": "1s",
	}, &d)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /directories: %d %v", resp.StatusCode, d)
	}
	return d["id"].(string)
}

// directoryOrgs lists the organizations of a person's memberships that a
// directory granted, and of those an operator made ("(admin)").
func directoryOrgs(t *testing.T, c *testcluster.Cluster, node int, userID string, w world) string {
	t.Helper()
	var list struct {
		Data []struct {
			OrgID       string `json:"org_id"`
			DirectoryID string `json:"directory_id"`
		} `json:"data"`
	}
	doOn(t, c, node, "GET", "/admin/v1/memberships?user_id="+userID, testcluster.AdminToken, nil, &list)
	names := map[string]string{w.orgA: "A", w.orgB: "B"}
	var out []string
	for _, m := range list.Data {
		n := names[m.OrgID]
		if m.DirectoryID == "" {
			n += "(admin)"
		}
		out = append(out, n)
	}
	if len(out) == 2 && out[0] > out[1] {
		out[0], out[1] = out[1], out[0]
	}
	return strings.Join(out, ",")
}

// passwordPage posts email and password on a fresh sign-in page of r and
// returns the answer.
func passwordPage(t *testing.T, c *testcluster.Cluster, r *rp, email, password string) *testcluster.Page {
	t.Helper()
	b := testcluster.NewBrowser(t)
	page := b.Follow(b.Get(r.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))), r.authBase())
	if !strings.Contains(page.Body, `name="password"`) {
		t.Fatalf("no sign-in form: %d\n%s", page.Status, page.Body)
	}
	return b.Submit(page, map[string]string{"email": email, "password": password}, "method", "password")
}

// TestDirectorySignIn drives the directory surface against a real slapd
// with go-oidc and a back-channel receiver: a person of two groups signs
// in through the organization picker with a sub derived from entryUUID;
// wrong passwords count toward the usual lockout; an injected filter finds
// nobody; a group removal takes back that membership only; a person
// locked in the directory is signed out at the next sync and the logout
// token reaches the app; a stopped directory gives a clear page within
// the time-out, and sign-in works again when it is back.
func TestDirectorySignIn(t *testing.T) {
	s := ldaptest.Start(t, directoryPeople())
	c := testcluster.New(t, testcluster.Options{Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	w := provision(t, c)
	dirID := registerDirectory(t, c, s, w)
	recv := newBCReceiver(t, c, w.multiID, time.Now)
	setBackchannel(t, c, w.multiID, recv.URL())
	multi := newRP(t, c, w.multiID, "", w.cb, "openid")

	// ann: staff and admins, so two organizations: the picker is shown
	// and signIn picks B.
	ann := world{email: "ann@corp.example", password: "ann-directory-pw", cb: w.cb, orgB: w.orgB}
	sess := signInApp(t, c, testcluster.NewBrowser(t), multi, ann)
	annID := directory.UserID(dirID, s.EntryUUID(ldaptest.PersonDN("ann")))
	var claims struct {
		Sub   string `json:"sub"`
		Email string `json:"email"`
	}
	if err := json.Unmarshal(payloadOf(t, sess.idToken), &claims); err != nil || claims.Sub != annID || sess.org != w.orgB {
		t.Fatalf("ID token: %+v org %s, want sub %s (from entryUUID) and org B picked", claims, sess.org, annID)
	}
	if got := directoryOrgs(t, c, 0, annID, w); got != "A,B" {
		t.Fatalf("ann's memberships: %s", got)
	}
	if u := userByEmail(t, c, "ann@corp.example"); u != annID {
		t.Fatalf("the person found by address is %s, want %s", u, annID)
	}

	// Filter injection finds nobody, even with ann's password.
	for _, email := range []string{"*", "ann@corp.example)(|(mail=*", "*)(uid=ann"} {
		if p := passwordPage(t, c, multi, email, "ann-directory-pw"); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "Incorrect email or password.") {
			t.Fatalf("injected %q: %d", email, p.Status)
		}
	}

	// bob: wrong passwords, then the lockout of the usual count.
	locked := 0
	for i := 1; i <= 11; i++ {
		p := passwordPage(t, c, multi, "bob@corp.example", "not-bobs-password")
		if p.Status == http.StatusTooManyRequests {
			locked = i
			break
		}
		if p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "Incorrect email or password.") {
			t.Fatalf("wrong password %d: %d", i, p.Status)
		}
	}
	if locked != 11 {
		t.Fatalf("bob was locked out at attempt %d, want 11 (after 10 failures)", locked)
	}
	if p := passwordPage(t, c, multi, "bob@corp.example", "bob-directory-pw"); p.Status != http.StatusTooManyRequests {
		t.Fatalf("bob's right password while locked: %d, want 429 before any bind", p.Status)
	}

	// ann leaves admins: at the next sync B is taken back, A stays.
	s.Modify(ldaptest.GroupDN("admins"), "member", ldaptest.PersonDN("carol"))
	waitUntil(t, "ann's admins membership taken back", 10*time.Second, func() bool { return directoryOrgs(t, c, 0, annID, w) == "A" })

	// ann is locked in the directory: her sessions end at the next sync
	// and the app hears of it, with the sid of its session.
	s.Modify(ldaptest.PersonDN("ann"), "pwdAccountLockedTime", "000001010000Z")
	toks := recv.waitAccepted(1)
	if toks[0].SID != sess.sid || toks[0].Sub != annID {
		t.Fatalf("logout token: %+v, want sid %s sub %s", toks[0], sess.sid, annID)
	}
	recv.checkValid()
	if got := directoryOrgs(t, c, 0, annID, w); got != "" {
		t.Fatalf("a locked person keeps memberships: %s", got)
	}
	if p := passwordPage(t, c, multi, "ann@corp.example", "ann-directory-pw"); p.Status != http.StatusBadRequest {
		t.Fatalf("a locked person's sign-in: %d", p.Status)
	}

	// The directory stops: a clear page within the time-out.
	s.Stop()
	start := time.Now()
	p := passwordPage(t, c, multi, "carol@corp.example", "carol-directory-pw")
	if p.Status != http.StatusServiceUnavailable || !strings.Contains(p.Body, "directory cannot be reached") {
		t.Fatalf("directory down: %d\n%s", p.Status, p.Body)
	}
	if d := time.Since(start); d > 12*time.Second {
		t.Fatalf("the page took %v", d)
	}
	s.Start()
	carol := world{email: "carol@corp.example", password: "carol-directory-pw", cb: w.cb, orgB: w.orgB}
	signInApp(t, c, testcluster.NewBrowser(t), multi, carol)

	// A second factor enrolled here still answers an app that asks for
	// mfa, after the bind.
	carolID := userByEmail(t, c, "carol@corp.example")
	var totp struct{ Secret string }
	if r := do(t, c, "POST", "/admin/v1/users/"+carolID+"/totp", testcluster.AdminToken, nil, &totp); r.StatusCode != 201 {
		t.Fatalf("totp: %d", r.StatusCode)
	}
	b := testcluster.NewBrowser(t)
	page := b.Follow(b.Get(multi.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()),
		acrValues("urn:service:sso:acr:mfa"))), multi.authBase())
	page = b.Follow(b.Submit(page, map[string]string{"email": carol.email, "password": carol.password}, "method", "password"), multi.authBase())
	if !strings.Contains(page.Body, `value="otp"`) {
		t.Fatalf("after the directory bind, want the second-factor page; got %d\n%s", page.Status, page.Body)
	}
	code, err := factor.TOTPCode(totp.Secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	page = b.Follow(b.Submit(page, map[string]string{"code": code}, "method", "otp"), multi.authBase())
	if strings.Contains(page.Body, `value="otp"`) || page.Status >= 400 {
		t.Fatalf("after the code: %d\n%s", page.Status, page.Body)
	}

	// The audit trail holds the directory's sign-out and refusals.
	var events struct {
		Data []struct {
			Subject string            `json:"subject"`
			SID     string            `json:"sid"`
			Actor   string            `json:"actor"`
			Detail  map[string]string `json:"detail"`
		} `json:"data"`
	}
	do(t, c, "GET", "/admin/v1/audit?type=logout&subject="+annID, testcluster.AdminToken, nil, &events)
	if len(events.Data) != 1 || events.Data[0].SID != sess.sid || events.Data[0].Detail["cause"] != "directory_disabled" || events.Data[0].Actor != "system" {
		t.Fatalf("logout events of ann: %+v", events.Data)
	}
	do(t, c, "GET", "/admin/v1/audit?type=signin&limit=1000", testcluster.AdminToken, nil, &events)
	reasons := map[string]int{}
	for _, e := range events.Data {
		reasons[e.Detail["reason"]]++
	}
	if reasons["directory_refused"] < 10 || reasons["directory_unavailable"] != 1 || reasons["unknown_account"] < 3 {
		t.Fatalf("sign-in failure reasons: %v", reasons)
	}

	var d struct {
		LastSync struct {
			OK     bool   `json:"ok"`
			People int    `json:"people"`
			Node   string `json:"node"`
		} `json:"last_sync"`
	}
	waitUntil(t, "a sync that sees carol", 10*time.Second, func() bool {
		do(t, c, "GET", "/admin/v1/directories/"+dirID, testcluster.AdminToken, nil, &d)
		return d.LastSync.OK && d.LastSync.People == 2
	})
}

// TestDirectorySyncRunsOnTheLeaderOnly: of three nodes only the leader
// syncs; when it is killed the next leader carries on, and a group change
// made after the failover is applied, then the removal of the person.
func TestDirectorySyncRunsOnTheLeaderOnly(t *testing.T) {
	s := ldaptest.Start(t, directoryPeople())
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	w := provision(t, c)
	dirID := registerDirectory(t, c, s, w)
	multi := newRP(t, c, w.multiID, "", w.cb, "openid")
	signInApp(t, c, testcluster.NewBrowser(t), multi, world{email: "ann@corp.example", password: "ann-directory-pw", cb: w.cb, orgB: w.orgB})
	annID := directory.UserID(dirID, s.EntryUUID(ldaptest.PersonDN("ann")))

	leader := c.WaitNewLeader()
	waitUntil(t, "the leader syncs", 10*time.Second, func() bool { return syncs(t, c, leader) >= 2 })
	for _, f := range c.Followers() {
		if n := syncs(t, c, f); n != 0 {
			t.Fatalf("follower %d synced %v times", f, n)
		}
	}
	c.Kill(leader)
	next := c.WaitNewLeader()
	waitUntil(t, "the new leader syncs", 15*time.Second, func() bool { return syncs(t, c, next) >= 1 })
	s.Modify(ldaptest.GroupDN("admins"), "member", ldaptest.PersonDN("carol"))
	waitUntil(t, "the group change after failover", 10*time.Second, func() bool { return directoryOrgs(t, c, next, annID, w) == "A" })
	// ann's entry is deleted: removed people lose what the directory gave.
	s.Delete(ldaptest.PersonDN("ann"))
	waitUntil(t, "ann's removal", 10*time.Second, func() bool { return directoryOrgs(t, c, next, annID, w) == "" })
}

// syncs is node i's oidcd_directory_syncs_total{outcome="ok"}, summed.
func syncs(t *testing.T, c *testcluster.Cluster, i int) float64 {
	t.Helper()
	total := 0.0
	for _, line := range metricsLines(t, c, i) {
		if strings.HasPrefix(line, "oidcd_directory_syncs_total{") && strings.Contains(line, `outcome="ok"`) {
			f, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
			total += f
		}
	}
	return total
}
