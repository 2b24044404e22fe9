package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/testcluster"
)

// newestRelease reads the newest release of ../../RELEASES: its version
// (without the v) and commit.
func newestRelease(t testing.TB) (version, commit string) {
	t.Helper()
	f, err := os.Open("../../RELEASES")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if fields := strings.Fields(line); len(fields) == 2 {
			version, commit = strings.TrimPrefix(fields[0], "v"), fields[1]
		}
	}
	if commit == "" {
		t.Fatal("RELEASES names no release")
	}
	return version, commit
}

var (
	releaseOnce sync.Once
	releaseBin  string
	releaseSkip string
	releaseErr  error
)

// previousRelease builds the newest release of RELEASES (once per test
// binary) with git worktree, stamped with its version as make build
// stamps it; it skips the test, saying why, where it cannot (a shallow
// clone, no git).
func previousRelease(t *testing.T) (version, bin string) {
	t.Helper()
	version, commit := newestRelease(t)
	releaseOnce.Do(func() {
		if out, err := exec.Command("git", "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
			releaseSkip = fmt.Sprintf("release %s (%s) is not in this clone (a shallow clone?): %v %s; fetch the history to run the upgrade tests", version, commit, err, out)
			return
		}
		dir, err := os.MkdirTemp("", "oidcd-release-")
		if err != nil {
			releaseErr = err
			return
		}
		wt := filepath.Join(dir, "worktree")
		if out, err := exec.Command("git", "worktree", "add", "--detach", wt, commit).CombinedOutput(); err != nil {
			releaseSkip = fmt.Sprintf("git worktree add for %s: %v %s", version, err, out)
			return
		}
		defer exec.Command("git", "worktree", "remove", "--force", wt).Run()
		releaseBin = filepath.Join(dir, "oidcd-"+version)
		build := exec.Command("go", "build", "-ldflags", "-X main.version="+version, "-o", releaseBin, "./cmd/oidcd")
		build.Dir = wt
		if out, err := build.CombinedOutput(); err != nil {
			releaseErr = fmt.Errorf("build %s: %v\n%s", version, err, out)
		}
	})
	switch {
	case releaseSkip != "":
		t.Skip(releaseSkip)
	case releaseErr != nil:
		t.Fatal(releaseErr)
	}
	return version, releaseBin
}

// releaseFormat is the state format the release runs: the newest format
// whose first release it is, as fsm declares them.
func releaseFormat(t testing.TB, version string) fsm.Format {
	t.Helper()
	for f := fsm.CurrentFormat; f >= fsm.FormatBase; f-- {
		if fsm.FormatRelease(f) == version {
			return f
		}
	}
	t.Fatalf("the newest release, %s, is the first release of no state format fsm declares (fsm.FormatRelease): "+
		"a release that raises CurrentFormat names itself in formatReleases", version)
	return 0
}

// upgradeFeature is something this tree adds to the replicated state
// since the previous release. At every step of the upgrade it is tried
// through a node that runs this tree: while any node runs the release it
// must be refused, or take the older path, leaving every node able to
// apply everything; once every node runs this tree it must work.
type upgradeFeature struct {
	// covers names the command types (fsm.Type.String) and fields
	// ("GoType.GoField") of fsm's declaration that this entry tries.
	covers []string
	try    func(u *upgradeCluster, via int, mixed bool) error
}

// upgradeFeatures is walked by the upgrade tests. Every command type and
// field fsm declares newer than the previous release's format must be
// covered (TestUpgradeFeaturesCoverTheDeclaration), so a new one cannot
// ship untried in a mixed cluster.
var upgradeFeatures = []upgradeFeature{
	{
		// The gate itself: the leader raises the format only once every
		// member announces it, and every node then holds it.
		covers: []string{"set_state_format", "SetStateFormat.Format", "SetStateFormat.Version"},
		try: func(u *upgradeCluster, via int, mixed bool) error {
			st, err := u.clusterStatus(via)
			if err != nil {
				return err
			}
			if mixed {
				if st.StateFormat != int(fsm.FormatBase) || !st.Mixed {
					return fmt.Errorf("while mixed: state format %d, mixed %v", st.StateFormat, st.Mixed)
				}
				return nil
			}
			if st.StateFormat != int(fsm.CurrentFormat) || st.Mixed {
				return fmt.Errorf("every node upgraded: state format %d, mixed %v", st.StateFormat, st.Mixed)
			}
			return nil
		},
	},
	{
		// An API key records who made it. A key the break-glass token
		// makes records no maker (the base format) and is made throughout;
		// a key made by a key (or a person) needs the newer format: while
		// mixed it is refused, 409, and nothing is made; afterwards it is
		// made and GET /api-keys names its maker. Deleting the maker ends it.
		covers: []string{"APIKey.MakerKind", "APIKey.MakerID"},
		try: func(u *upgradeCluster, via int, mixed bool) error {
			base := "http://" + u.https[via]
			as := func(bearer, method, path string, body any) (int, []byte) {
				var b []byte
				if body != nil {
					b, _ = json.Marshal(body)
				}
				req, _ := http.NewRequest(method, base+"/admin/v1"+path, bytes.NewReader(b))
				req.Header.Set("Authorization", "Bearer "+bearer)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return 0, []byte(err.Error())
				}
				defer resp.Body.Close()
				out, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, out
			}
			status, b := as(u.token, "POST", "/api-keys", map[string]any{"name": "upgrade maker", "role": "admin", "expires_in": 3600})
			var maker struct{ ID, Key string }
			if status != http.StatusCreated || json.Unmarshal(b, &maker) != nil {
				return fmt.Errorf("POST /api-keys with the break-glass token: %d %s", status, b)
			}
			defer as(u.token, "DELETE", "/api-keys/"+maker.ID, nil)
			status, b = as(maker.Key, "POST", "/api-keys", map[string]any{"name": "upgrade made", "role": "auditor", "expires_in": 600})
			if mixed {
				if status != http.StatusConflict || !bytes.Contains(b, []byte("records who made it")) {
					return fmt.Errorf("while mixed, POST /api-keys with an API key: got %d %s, want 409 naming the maker record", status, b)
				}
				return nil
			}
			var made struct {
				ID        string
				CreatedBy struct{ Kind, ID string } `json:"created_by"`
			}
			if status != http.StatusCreated || json.Unmarshal(b, &made) != nil {
				return fmt.Errorf("POST /api-keys with an API key: got %d %s, want 201", status, b)
			}
			status, b = as(u.token, "GET", "/api-keys?page_size=100", nil)
			if status != http.StatusOK || !bytes.Contains(b, []byte(`"created_by":{"kind":"api_key","id":"`+maker.ID+`"}`)) {
				return fmt.Errorf("GET /api-keys: got %d %s, want the key made by %s", status, b, maker.ID)
			}
			if status, b := as(u.token, "DELETE", "/api-keys/"+maker.ID, nil); status != http.StatusNoContent {
				return fmt.Errorf("DELETE the maker: %d %s", status, b)
			}
			if status, b = as(u.token, "GET", "/api-keys?page_size=100", nil); status != http.StatusOK || bytes.Contains(b, []byte(made.ID)) {
				return fmt.Errorf("GET /api-keys after the maker was deleted: got %d %s, want %s gone with it", status, b, made.ID)
			}
			return nil
		},
	},
	{
		// A client's application_type and web_origins (issue 43). A
		// registration that names neither, or application_type web (which
		// is not stored), writes the base format and is made throughout.
		// A native client, and one that names its web origins (none, too),
		// need the newer format: while mixed each is refused, 409 naming
		// the fields, and nothing is made; afterwards each is made and
		// every node shows it, and the default origins follow the
		// redirect URIs.
		covers: []string{"Client.ApplicationType", "Client.WebOrigins", "Client.WebOriginsSet"},
		try: func(u *upgradeCluster, via int, mixed bool) error {
			base := "http://" + u.https[via]
			status, b := u.adminAt(base, "GET", "/clients/"+u.rp.ClientID, nil)
			var spa struct {
				OrganizationID string `json:"organization_id"`
			}
			if status != http.StatusOK || json.Unmarshal(b, &spa) != nil {
				return fmt.Errorf("GET the provisioned client: %d %s", status, b)
			}
			type shown struct {
				ClientID        string   `json:"client_id"`
				ApplicationType string   `json:"application_type"`
				WebOrigins      []string `json:"web_origins"`
			}
			bodies := []struct {
				name string
				body map[string]any
				gate bool  // needs the newer format
				want shown // once made
			}{
				{"a web client", map[string]any{"application_type": "web", "redirect_uris": []string{"https://web.example/cb"}},
					false, shown{ApplicationType: "web", WebOrigins: []string{"https://web.example"}}},
				{"a native client", map[string]any{"application_type": "native", "redirect_uris": []string{"http://127.0.0.1/callback", "com.example.app:/callback"}},
					true, shown{ApplicationType: "native", WebOrigins: []string{"http://127.0.0.1"}}},
				{"a client with web origins", map[string]any{"redirect_uris": []string{"https://spa.example/cb"}, "web_origins": []string{"https://SPA.example:443", "https://other.example"}},
					true, shown{ApplicationType: "web", WebOrigins: []string{"https://spa.example", "https://other.example"}}},
				{"a client with no web origins", map[string]any{"redirect_uris": []string{"https://closed.example/cb"}, "web_origins": []string{}},
					true, shown{ApplicationType: "web", WebOrigins: []string{}}},
			}
			for _, c := range bodies {
				c.body["name"], c.body["type"], c.body["organization_id"] = "Upgrade "+c.name, "public", spa.OrganizationID
				status, b := u.adminAt(base, "POST", "/clients", c.body)
				if mixed && c.gate {
					if status != http.StatusConflict || !bytes.Contains(b, []byte("application_type native or web_origins")) {
						return fmt.Errorf("while mixed, POST %s: got %d %s, want 409 naming the fields", c.name, status, b)
					}
					continue
				}
				var made shown
				if status != http.StatusCreated || json.Unmarshal(b, &made) != nil {
					return fmt.Errorf("POST %s: got %d %s, want 201", c.name, status, b)
				}
				defer u.adminAt(base, "DELETE", "/clients/"+made.ClientID, nil)
				for i := range 3 {
					if mixed && u.labels[i] != "new" {
						continue // an older node shows neither field
					}
					status, b := u.adminAt("http://"+u.https[i], "GET", "/clients/"+made.ClientID, nil)
					var got shown
					if status != http.StatusOK || json.Unmarshal(b, &got) != nil ||
						got.ApplicationType != c.want.ApplicationType || !slices.Equal(got.WebOrigins, c.want.WebOrigins) || got.WebOrigins == nil {
						return fmt.Errorf("%s, read back on node %d: got %d %s, want application_type %q and web_origins %q",
							c.name, i, status, b, c.want.ApplicationType, c.want.WebOrigins)
					}
				}
			}
			return nil
		},
	},
	{
		// Identity providers (federation, issue 44): every command and
		// record of fsm/federation.go is of the newer format. While mixed,
		// POST /identity-providers is refused, 409 naming the feature, and
		// nothing is made; so is an unlink. Once every node is upgraded the
		// provider is made, every node shows it (the secret never), and
		// DELETE removes it everywhere. The commands only a sign-in
		// proposes (federated_sign_in, upstream_logout), and the session
		// and membership fields they set, cannot be proposed while mixed:
		// they name a provider, and none can exist then. No sign-in through
		// a provider, no link and no unlink of one.
		covers: []string{"put_identity_provider", "delete_identity_provider", "federated_sign_in", "unlink_identity", "upstream_logout",
			"PutIdentityProvider.Create", "PutIdentityProvider.Provider", "PutIdentityProvider.ExpectUpdatedAt", "DeleteIdentityProvider.At", "DeleteIdentityProvider.ID",
			"IdentityProvider.ID", "IdentityProvider.Slug", "IdentityProvider.DisplayName", "IdentityProvider.Issuer", "IdentityProvider.ClientID",
			"IdentityProvider.ClientSecret", "IdentityProvider.Scopes", "IdentityProvider.OrgID", "IdentityProvider.EmailDomains",
			"IdentityProvider.Provisioning", "IdentityProvider.Memberships", "IdentityProvider.TrustMFA", "IdentityProvider.BackchannelLogout",
			"IdentityProvider.EndUpstreamSession", "IdentityProvider.Enabled", "IdentityProvider.CreatedAt", "IdentityProvider.UpdatedAt",
			"ProviderMemberships.OrgID", "ProviderMemberships.GroupsClaim", "ProviderMemberships.GroupOrgs",
			"UnlinkIdentity.UserID", "UnlinkIdentity.IdentityID", "UnlinkIdentity.KeepWayIn", "UnlinkIdentity.EndSessions", "UnlinkIdentity.At",
			// Proposed only by a sign-in through a provider, or an upstream's
			// logout token naming one: none exists while mixed.
			"FederatedSignIn.ProviderID", "FederatedSignIn.Subject", "FederatedSignIn.Email", "FederatedSignIn.EmailVerified",
			"FederatedSignIn.IdentityID", "FederatedSignIn.UserID", "FederatedSignIn.AccountUserID", "FederatedSignIn.EndSessions", "FederatedSignIn.OrgIDs",
			"FederatedSignIn.MembershipIDs", "FederatedSignIn.Session", "FederatedSignIn.At",
			"Identity.ID", "Identity.UserID", "Identity.ProviderID", "Identity.Subject", "Identity.Email", "Identity.LinkedAt", "Identity.LastUsedAt",
			"SSOSession.IdentityID", "SSOSession.ProviderID", "SSOSession.UpstreamSID", "SSOSession.UpstreamIDToken", "Membership.ProviderID",
			"UpstreamLogout.ProviderID", "UpstreamLogout.JTI", "UpstreamLogout.ExpiresAt", "UpstreamLogout.SID", "UpstreamLogout.Subject", "UpstreamLogout.At"},
		try: func(u *upgradeCluster, via int, mixed bool) error {
			base := "http://" + u.https[via]
			status, b := u.adminAt(base, "GET", "/clients/"+u.rp.ClientID, nil)
			var spa struct {
				OrganizationID string `json:"organization_id"`
			}
			if status != http.StatusOK || json.Unmarshal(b, &spa) != nil {
				return fmt.Errorf("GET the provisioned client: %d %s", status, b)
			}
			status, b = u.adminAt(base, "GET", "/users?email=ann@example.com", nil)
			var people struct{ Data []struct{ ID string } }
			if status != http.StatusOK || json.Unmarshal(b, &people) != nil || len(people.Data) != 1 {
				return fmt.Errorf("GET the provisioned person: %d %s", status, b)
			}
			unlink := "/users/" + people.Data[0].ID + "/identities/00000000-0000-4000-8000-000000000044"
			// The provider is the site's while it lives, so the sign-ins of
			// the load see its button: its domain is not ann's (an address
			// of a provider's domain goes to that upstream), and its issuer
			// is a loopback port where nothing listens.
			const slug = "upgrade-idp"
			status, b = u.adminAt(base, "POST", "/identity-providers", map[string]any{"slug": slug, "display_name": "Upgrade SSO",
				"issuer": "http://127.0.0.1:9/realms/upgrade", "client_id": "oidcd", "client_secret": "upgrade-secret",
				"scopes": []string{"openid", "email", "groups"}, "email_domains": []string{"upgrade.example"}, "provisioning": "create_or_link",
				"memberships": map[string]any{"organization_id": spa.OrganizationID, "groups_claim": "groups",
					"group_organizations": map[string]string{"staff": spa.OrganizationID}},
				"trust_mfa": true, "backchannel_logout": true, "end_upstream_session": true, "enabled": true})
			if mixed {
				if status != http.StatusConflict || !bytes.Contains(b, []byte("identity providers (federation)")) {
					return fmt.Errorf("while mixed, POST /identity-providers: got %d %s, want 409 naming the feature", status, b)
				}
				if status, b := u.adminAt(base, "DELETE", unlink, nil); status != http.StatusConflict {
					return fmt.Errorf("while mixed, an unlink: got %d %s, want 409", status, b)
				}
				for i := range 3 {
					if u.labels[i] != "new" {
						continue // an older node serves no such route
					}
					if status, b := u.adminAt("http://"+u.https[i], "GET", "/identity-providers", nil); status != http.StatusOK || bytes.Contains(b, []byte(slug)) {
						return fmt.Errorf("while mixed, GET /identity-providers on node %d: got %d %s, want 200 and no provider", i, status, b)
					}
				}
				return nil
			}
			var made struct {
				ID              string `json:"id"`
				ClientSecretSet bool   `json:"client_secret_set"`
			}
			if status != http.StatusCreated || json.Unmarshal(b, &made) != nil || !made.ClientSecretSet {
				return fmt.Errorf("POST /identity-providers: got %d %s, want 201", status, b)
			}
			defer u.adminAt(base, "DELETE", "/identity-providers/"+made.ID, nil)
			for i := range 3 {
				status, b := u.adminAt("http://"+u.https[i], "GET", "/identity-providers/"+made.ID, nil)
				if status != http.StatusOK || !bytes.Contains(b, []byte(`"slug":"`+slug+`"`)) || bytes.Contains(b, []byte("upgrade-secret")) {
					return fmt.Errorf("GET the provider on node %d: got %d %s", i, status, b)
				}
			}
			if status, b := u.adminAt(base, "DELETE", unlink, nil); status != http.StatusNotFound {
				return fmt.Errorf("an unlink of no link: got %d %s, want 404", status, b)
			}
			if status, b := u.adminAt(base, "DELETE", "/identity-providers/"+made.ID, nil); status != http.StatusNoContent {
				return fmt.Errorf("DELETE the provider: got %d %s, want 204", status, b)
			}
			for i := range 3 {
				if status, b := u.adminAt("http://"+u.https[i], "GET", "/identity-providers/"+made.ID, nil); status != http.StatusNotFound {
					return fmt.Errorf("GET the deleted provider on node %d: got %d %s, want 404", i, status, b)
				}
			}
			return nil
		},
	},
}

// TestUpgradeFeaturesCoverTheDeclaration: the table of features tried in
// a mixed cluster covers exactly what fsm declares newer than the newest
// release, so it cannot go stale.
func TestUpgradeFeaturesCoverTheDeclaration(t *testing.T) {
	version, _ := newestRelease(t)
	rf := releaseFormat(t, version)
	var declared []string
	for _, typ := range fsm.CommandsSince(rf) {
		declared = append(declared, typ.String())
	}
	declared = append(declared, fsm.FieldsSince(rf)...)
	var covered []string
	for _, f := range upgradeFeatures {
		covered = append(covered, f.covers...)
	}
	for _, d := range declared {
		if !slices.Contains(covered, d) {
			t.Errorf("%s is newer than release %s (format %d) but no upgradeFeature tries it in a mixed cluster", d, version, rf)
		}
	}
	for _, c := range covered {
		if !slices.Contains(declared, c) {
			t.Errorf("an upgradeFeature covers %s, which fsm does not declare newer than release %s", c, version)
		}
	}
}

// upgradeBalancer balances as deploy/haproxy/haproxy.cfg does: it checks
// each node's /readyz every interval, takes a node out after two failed
// checks and back after two good ones, round-robins over the nodes in,
// and sends a request that could not connect to the next one (retries,
// option redispatch).
type upgradeBalancer struct {
	next    atomic.Uint64
	targets []*url.URL
	mu      sync.Mutex
	up      []bool
	streak  []int // consecutive checks that disagree with up
}

const balancerInterval = 250 * time.Millisecond

// check runs the health checks until done is closed.
func (b *upgradeBalancer) check(done <-chan struct{}) {
	b.mu.Lock()
	b.up, b.streak = make([]bool, len(b.targets)), make([]int, len(b.targets))
	b.mu.Unlock()
	cl := &http.Client{Timeout: time.Second}
	for {
		for i, target := range b.targets {
			ok := false
			if resp, err := cl.Get(target.String() + "/readyz"); err == nil {
				resp.Body.Close()
				ok = resp.StatusCode == http.StatusOK
			}
			b.mu.Lock()
			if ok == b.up[i] {
				b.streak[i] = 0
			} else if b.streak[i]++; b.streak[i] >= 2 {
				b.up[i], b.streak[i] = ok, 0
			}
			b.mu.Unlock()
		}
		select {
		case <-done:
			return
		case <-time.After(balancerInterval):
		}
	}
}

func (b *upgradeBalancer) allUp() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.up != nil && !slices.Contains(b.up, false)
}

func (b *upgradeBalancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	var in []*url.URL
	for i, target := range b.targets {
		if b.up[i] {
			in = append(in, target)
		}
	}
	b.mu.Unlock()
	start := int(b.next.Add(1))
	for k := 0; k < len(in) && k < 4; k++ {
		target := in[(start+k)%len(in)]
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = target.Scheme, target.Host
		out.Body = io.NopCloser(bytes.NewReader(body))
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			continue // could not connect, or the node went away: the next one
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
		resp.Body.Close()
		return
	}
	http.Error(w, "no node", http.StatusServiceUnavailable)
}

// upgradeCluster is three `oidcd serve` processes behind a balancer, each
// of the binary it was last started from.
type upgradeCluster struct {
	t       *testing.T
	dir     string
	token   string
	issuer  string
	secrets []string
	https   [3]string
	configs [3]string
	procs   [3]*exec.Cmd
	labels  [3]string // which binary each node runs: a version, or "new"
	starts  [3]int
	lb      *upgradeBalancer
	rp      oauth2.Config
	verify  *gooidc.IDTokenVerifier
}

func newUpgradeCluster(t *testing.T, bins [3]string, labels [3]string) *upgradeCluster {
	t.Helper()
	newBin := builtBinary(t)
	u := &upgradeCluster{t: t, dir: t.TempDir(), lb: &upgradeBalancer{}}
	u.token = strings.TrimSpace(oidcd(t, newBin, 0, "keygen"))
	key := strings.TrimSpace(oidcd(t, newBin, 0, "keygen"))
	u.secrets = []string{"OIDCD_CLUSTER_KEY=" + key, "OIDCD_ADMIN_TOKEN=" + u.token}
	ports := freePorts(t, 10)
	u.issuer = "http://" + ports[9]
	srv := &http.Server{Addr: ports[9], Handler: u.lb}
	go srv.ListenAndServe()
	t.Cleanup(func() { srv.Close() })
	checks := make(chan struct{})
	t.Cleanup(func() { close(checks) })
	for i := range 3 {
		u.https[i] = ports[3*i]
		target, _ := url.Parse("http://" + ports[3*i])
		u.lb.targets = append(u.lb.targets, target)
		var join []string
		for j := range 3 {
			if j != i {
				join = append(join, fmt.Sprintf("%q", ports[3*j+2]))
			}
		}
		u.configs[i] = filepath.Join(u.dir, fmt.Sprintf("node%d.toml", i))
		os.WriteFile(u.configs[i], []byte(fmt.Sprintf("issuer = %q\nhttp-addr = %q\nraft-addr = %q\ngossip-addr = %q\ndata-dir = %q\nbootstrap-expect = 3\njoin = [%s]\nrate-limit = \"off\"\n",
			u.issuer, ports[3*i], ports[3*i+1], ports[3*i+2], filepath.Join(u.dir, fmt.Sprintf("data%d", i)), strings.Join(join, ", "))), 0o644)
	}
	for i := range 3 {
		u.start(i, bins[i], labels[i])
	}
	for i := range 3 {
		u.waitReady(i)
	}
	go u.lb.check(checks)
	for deadline := time.Now().Add(5 * time.Second); !u.lb.allUp(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the balancer does not see the nodes ready")
		}
	}
	u.provision()
	return u
}

// start starts node i from bin; label names the binary in the logs.
func (u *upgradeCluster) start(i int, bin, label string) {
	u.t.Helper()
	u.starts[i]++
	u.labels[i] = label
	u.procs[i] = startNode(u.t, bin, u.configs[i], u.secrets, filepath.Join(u.dir, fmt.Sprintf("node%d-%d-%s.log", i, u.starts[i], label)))
}

// stop sends SIGTERM to node i and returns its exit code.
func (u *upgradeCluster) stop(i int) int { u.t.Helper(); return stop(u.t, u.procs[i]) }

func (u *upgradeCluster) ready(i int) bool {
	resp, err := http.Get("http://" + u.https[i] + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (u *upgradeCluster) waitReady(i int) {
	u.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !u.ready(i) {
		if time.Now().After(deadline) {
			u.t.Fatalf("node %d (%s) not ready within 45 s\n%s", i, u.labels[i], u.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logs is the tail of every node log this cluster wrote.
func (u *upgradeCluster) logs() string {
	var sb strings.Builder
	files, _ := filepath.Glob(filepath.Join(u.dir, "node*.log"))
	slices.Sort(files)
	for _, f := range files {
		b, _ := os.ReadFile(f)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		fmt.Fprintf(&sb, "--- %s\n%s\n", filepath.Base(f), strings.Join(lines[max(0, len(lines)-25):], "\n"))
	}
	return sb.String()
}

// admin calls the admin API through the balancer.
func (u *upgradeCluster) admin(method, path string, body any) (int, map[string]any) {
	status, b := u.adminAt(u.issuer, method, path, body)
	var out map[string]any
	json.Unmarshal(b, &out)
	return status, out
}

// adminAt calls the admin API at base (a node's http://host:port, or the
// balancer's issuer).
func (u *upgradeCluster) adminAt(base, method, path string, body any) (int, []byte) {
	var rd *strings.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	req, _ := http.NewRequest(method, base+"/admin/v1"+path, rd)
	req.Header.Set("Authorization", "Bearer "+u.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes()
}

type upgradeStatus struct {
	StateFormat int  `json:"state_format"`
	Mixed       bool `json:"mixed"`
	Members     []struct {
		ID          string `json:"id"`
		Version     string `json:"version"`
		StateFormat int    `json:"state_format"`
	} `json:"members"`
}

// clusterStatus is GET /cluster as node i (which runs this tree) sees it.
func (u *upgradeCluster) clusterStatus(i int) (upgradeStatus, error) {
	var st upgradeStatus
	status, b := u.adminAt("http://"+u.https[i], "GET", "/cluster?stale=true", nil)
	if status != http.StatusOK {
		return st, fmt.Errorf("GET /cluster on node %d: %d %s", i, status, b)
	}
	err := json.Unmarshal(b, &st)
	return st, err
}

const upgradeCallback = "http://127.0.0.1:9/callback"

// provision makes an organization, a person in it and a public client,
// and the relying party that signs the person in.
func (u *upgradeCluster) provision() {
	t := u.t
	_, org := u.admin("POST", "/organizations", map[string]any{"slug": "acme", "name": "Acme"})
	_, user := u.admin("POST", "/users", map[string]any{"email": "ann@example.com", "email_verified": true, "password": "correct horse battery"})
	u.admin("POST", "/memberships", map[string]any{"user_id": user["id"], "org_id": org["id"]})
	_, cl := u.admin("POST", "/clients", map[string]any{"name": "SPA", "type": "public", "redirect_uris": []string{upgradeCallback}, "organization_id": org["id"], "skip_consent": true})
	if cl["client_id"] == nil {
		t.Fatalf("provisioning failed\n%s", u.logs())
	}
	prov, err := gooidc.NewProvider(context.Background(), u.issuer)
	if err != nil {
		t.Fatal(err)
	}
	u.rp = oauth2.Config{ClientID: cl["client_id"].(string), Endpoint: prov.Endpoint(), RedirectURL: upgradeCallback, Scopes: []string{"openid"}}
	u.verify = prov.Verifier(&gooidc.Config{ClientID: u.rp.ClientID})
}

// signIn signs ann in through b (silently when b holds her session),
// redeems the code and checks the ID token, with go-oidc and x/oauth2.
func (u *upgradeCluster) signIn(b *testcluster.Browser) error {
	pkce := oauth2.GenerateVerifier()
	page := b.Follow(b.Get(u.rp.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(pkce), gooidc.Nonce("nonce-0123456789"))), u.issuer)
	if strings.Contains(page.Body, `name="password"`) {
		page = b.Follow(b.Submit(page, map[string]string{"email": "ann@example.com", "password": "correct horse battery"}, "method", "password"), u.issuer)
	}
	loc, err := url.Parse(page.Location())
	if err != nil || loc.Query().Get("code") == "" {
		return fmt.Errorf("no code: %d %.200s", page.Status, page.Body)
	}
	tok, err := u.rp.Exchange(context.Background(), loc.Query().Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		return err
	}
	_, err = u.verify.Verify(context.Background(), tok.Extra("id_token").(string))
	return err
}

// upgradeLoad signs people in and creates organizations through the
// balancer until stop is called, recording what was acknowledged.
type upgradeLoad struct {
	mu       sync.Mutex
	acked    []string
	failed   []string
	signIns  atomic.Int64
	done     chan struct{}
	wg       sync.WaitGroup
	stopOnce sync.Once
}

func (u *upgradeCluster) startLoad(workers int, deadline time.Time) *upgradeLoad {
	l := &upgradeLoad{done: make(chan struct{})}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				select {
				case <-l.done:
					return
				default:
				}
				if err := u.signIn(testcluster.NewBrowser(u.t)); err == nil {
					l.signIns.Add(1)
				} else {
					l.mu.Lock()
					l.failed = append(l.failed, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), err))
					l.mu.Unlock()
				}
				slug := fmt.Sprintf("w%d-%d", w, i)
				if status, _ := u.admin("POST", "/organizations", map[string]any{"slug": slug, "name": slug}); status == http.StatusCreated {
					l.mu.Lock()
					l.acked = append(l.acked, slug)
					l.mu.Unlock()
				}
			}
		}()
	}
	return l
}

func (l *upgradeLoad) stop() {
	l.stopOnce.Do(func() { close(l.done) })
	l.wg.Wait()
}

// tryFeatures tries every upgradeFeature through node via.
func (u *upgradeCluster) tryFeatures(via int, mixed bool, when string) {
	u.t.Helper()
	for _, f := range upgradeFeatures {
		if err := f.try(u, via, mixed); err != nil {
			u.t.Errorf("%s, through node %d: %s: %v", when, via, f.covers[0], err)
		}
	}
}

// stateOf reads what node i holds, each list through ?stale=true so that
// the node answers from its own copy: the records of every admin list and
// the audit chain's head.
func (u *upgradeCluster) stateOf(i int) (map[string]string, error) {
	out := map[string]string{}
	base := "http://" + u.https[i]
	for _, path := range []string{"/organizations", "/users", "/memberships", "/clients", "/admins", "/api-keys", "/invitations", "/directories", "/keys"} {
		var all []json.RawMessage
		for page := 1; page < 1000; page++ {
			status, b := u.adminAt(base, "GET", fmt.Sprintf("%s?stale=true&page_size=100&page=%d", path, page), nil)
			if status != http.StatusOK {
				return nil, fmt.Errorf("GET %s on node %d: %d %s", path, i, status, b)
			}
			var list struct {
				Data       []json.RawMessage `json:"data"`
				Pagination struct {
					HasNext bool `json:"has_next"`
				} `json:"pagination"`
			}
			if err := json.Unmarshal(b, &list); err != nil {
				return nil, fmt.Errorf("GET %s on node %d: %v", path, i, err)
			}
			all = append(all, list.Data...)
			if !list.Pagination.HasNext {
				break
			}
		}
		b, _ := json.Marshal(all)
		out[path] = string(b)
	}
	status, b := u.adminAt(base, "GET", "/audit/verify?stale=true", nil)
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /audit/verify on node %d: %d %s", i, status, b)
	}
	var v struct {
		OK       bool   `json:"ok"`
		Count    uint64 `json:"count"`
		LastSeq  uint64 `json:"last_seq"`
		HeadHash string `json:"head_hash"`
	}
	json.Unmarshal(b, &v)
	if !v.OK {
		return nil, fmt.Errorf("node %d: the audit trail does not verify: %s", i, b)
	}
	out["audit head"] = fmt.Sprintf("seq %d, %d events, %s", v.LastSeq, v.Count, v.HeadHash)
	return out, nil
}

// sameState waits (a node may still be applying the last writes) until
// every node holds the same records and audit head, and fails the test
// naming the first difference otherwise.
func (u *upgradeCluster) sameState(within time.Duration) {
	u.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var states [3]map[string]string
		var diff string
		for i := range 3 {
			st, err := u.stateOf(i)
			if err != nil {
				diff = err.Error()
				break
			}
			states[i] = st
		}
		if diff == "" {
		compare:
			for i := 1; i < 3; i++ {
				for k, v := range states[0] {
					if a, b := sharedFields(v, states[i][k]); a != b {
						diff = fmt.Sprintf("%s: node 0 holds %.300s\nnode %d holds %.300s", k, a, i, b)
						break compare
					}
				}
			}
		}
		if diff == "" {
			u.t.Logf("every node holds the same state: %d organizations' worth of lists, audit %s", strings.Count(states[0]["/organizations"], `"slug"`), states[0]["audit head"])
			return
		}
		if time.Now().After(deadline) {
			u.t.Fatalf("the nodes' states differ after %v: %s", within, diff)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// sharedFields is two nodes' JSON lists of records, each record cut to
// the fields both nodes show: while versions are mixed, a newer node's
// answer holds fields an older one does not know (a client's
// application_type, say), which no node can set until the format is
// raised, so only what both show is the state to compare. Anything that
// is not two lists of the same length is returned as it is.
func sharedFields(a, b string) (string, string) {
	var ra, rb []map[string]json.RawMessage
	if json.Unmarshal([]byte(a), &ra) != nil || json.Unmarshal([]byte(b), &rb) != nil || len(ra) != len(rb) {
		return a, b
	}
	for j := range ra {
		for k := range ra[j] {
			if _, ok := rb[j][k]; !ok {
				delete(ra[j], k)
			}
		}
		for k := range rb[j] {
			if _, ok := ra[j][k]; !ok {
				delete(rb[j], k)
			}
		}
	}
	ja, _ := json.Marshal(ra)
	jb, _ := json.Marshal(rb)
	return string(ja), string(jb)
}

// hasOrgs reports the first acknowledged organization a node lacks.
func (u *upgradeCluster) missingOrg(i int, acked []string) (string, error) {
	st, err := u.stateOf(i)
	if err != nil {
		return "", err
	}
	var orgs []struct {
		Slug string `json:"slug"`
	}
	json.Unmarshal([]byte(st["/organizations"]), &orgs)
	seen := map[string]bool{}
	for _, o := range orgs {
		seen[o.Slug] = true
	}
	for _, s := range acked {
		if !seen[s] {
			return s, nil
		}
	}
	return "", nil
}

// TestRollingUpgradeFromThePreviousRelease: three nodes of the previous
// release (RELEASES) serve sign-ins and admin writes under load through a
// balancer; each node in turn is stopped and started again from this tree
// on the same data, as docs/operators/upgrades.md says. At every step,
// every feature this tree adds to the replicated state is tried through
// an upgraded node (upgradeFeatures): refused while any node runs the
// release, working once none does. Every node keeps running (each exits 0
// on SIGTERM), every sign-in succeeds, every organization acknowledged at
// any time is on every node at the end, the people signed in before the
// upgrade keep their sessions, and every node ends with the same records
// and the same audit chain head.
func TestRollingUpgradeFromThePreviousRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two versions and starts six processes")
	}
	version, oldBin := previousRelease(t)
	newBin := builtBinary(t)
	u := newUpgradeCluster(t, [3]string{oldBin, oldBin, oldBin}, [3]string{version, version, version})
	before := testcluster.NewBrowser(t)
	if err := u.signIn(before); err != nil {
		t.Fatalf("sign-in on %s: %v\n%s", version, err, u.logs())
	}

	load := u.startLoad(2, time.Now().Add(3*time.Minute))
	t.Cleanup(load.stop)
	for i := range 3 {
		time.Sleep(time.Second)
		if code := u.stop(i); code != 0 {
			t.Errorf("node %d (%s) exited %d on SIGTERM\n%s", i, u.labels[i], code, u.logs())
		}
		u.start(i, newBin, "new")
		u.waitReady(i)
		t.Logf("node %d upgraded", i)
		mixed := i < 2
		if !mixed {
			// The last node is up: the leader raises the format within a
			// few seconds of seeing every member announce it.
			deadline := time.Now().Add(20 * time.Second)
			for {
				st, err := u.clusterStatus(i)
				if err == nil && st.StateFormat == int(fsm.CurrentFormat) && !st.Mixed {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("every node upgraded, yet after 20 s the cluster says %+v (%v)\n%s", st, err, u.logs())
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		for j := 0; j <= i; j++ {
			u.tryFeatures(j, mixed, fmt.Sprintf("after node %d was upgraded", i))
		}
	}
	time.Sleep(time.Second)
	load.stop()
	t.Logf("during the upgrade: %d sign-ins, %d failed, %d organizations acknowledged", load.signIns.Load(), len(load.failed), len(load.acked))
	if load.signIns.Load() == 0 {
		t.Fatalf("no sign-in succeeded during the upgrade\n%s", u.logs())
	}
	if len(load.failed) > 0 {
		t.Errorf("%d sign-ins failed during the upgrade, the first: %s\n%s", len(load.failed), load.failed[0], u.logs())
	}
	for i := range 3 {
		deadline := time.Now().Add(15 * time.Second)
		for {
			missing, err := u.missingOrg(i, load.acked)
			if err == nil && missing == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d lost the acknowledged organization %q (%v)", i, missing, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// The session opened before the upgrade still signs in silently.
	if err := u.signIn(before); err != nil {
		t.Fatalf("the session from %s after the upgrade: %v", version, err)
	}
	u.sameState(15 * time.Second)
	for i := range 3 {
		if !u.ready(i) {
			t.Errorf("node %d is not ready at the end\n%s", i, u.logs())
		}
	}
}
