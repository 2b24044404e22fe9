package node

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/fsm"
)

// bootstrapOnce runs on the leader: it puts the admin token's hash in the
// replicated state the first time the state holds none (from --admin-token,
// or generated), creates the browser key, and seeds the demo data when
// asked. Each is idempotent, so a new leader running them again changes
// nothing.
func (n *Node) bootstrapOnce(ctx context.Context) {
	for attempt := 0; ; attempt++ {
		err := n.ensureAdminToken(ctx)
		if err == nil {
			err = n.sessions.EnsureBrowserKey(ctx, n.cluster)
		}
		if err == nil && n.cfg.Demo {
			err = n.seedDemo(ctx)
		}
		if err == nil || ctx.Err() != nil {
			if err != nil {
				n.log.Warn("bootstrap interrupted", "error", err)
			}
			return
		}
		n.log.Warn("bootstrap step failed; retrying", "error", err, "attempt", attempt)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// ensureAdminToken makes the replicated state hold the admin token's hash
// (the break-glass token lives there, wherever it came from). When the
// state holds none, the leader seeds it from its --admin-token (or
// OIDCD_ADMIN_TOKEN), or else generates a token, writes it to
// <data-dir>/admin-token and prints it once; either way a backup carries
// it. Once the state holds a hash it rules: a flag or a token file that no
// longer matches is reported (noteAdminToken) and changes nothing.
//
// It runs at every leadership gain, so a cluster whose nodes all ran with
// --admin-token before the token was replicated (a rolling upgrade from
// such a version) gets it seeded once, by the first upgraded leader; and
// after a restore (adminCluster.Restore), so a backup that holds no hash
// gets one at once.
func (n *Node) ensureAdminToken(ctx context.Context) error {
	h, err := n.fsm.State().AdminTokenHash()
	if err != nil {
		return err
	}
	if h != "" {
		n.noteAdminToken(h)
		if n.cfg.AdminToken == "" && n.tokenFileHolds(h) {
			// A later start: the token was shown once; say where it is.
			fmt.Fprintf(n.cfg.Out, "\nAdmin API token: in %s\n\n", n.AdminTokenFile())
		}
		return nil
	}
	if n.cfg.AdminToken != "" {
		res, err := n.cluster.Apply(ctx, fsm.MustCommand(fsm.TypeSetAdminToken, fsm.SetAdminToken{Hash: admin.HashToken(n.cfg.AdminToken)}))
		if err != nil {
			return err
		}
		if errors.Is(res.Err, fsm.ErrConflict) {
			return nil // another leader won the race; its token stands (noteAdminToken says so if it differs)
		}
		n.log.Info("admin token: the replicated state held none; seeded it from --admin-token")
		return nil
	}
	token := admin.GenerateToken()
	hash := admin.HashToken(token)
	// The file below will hold this token: no need to check it once the
	// hash is applied (and a check racing the write would see it stale).
	n.adminTok.expect(hash)
	res, err := n.cluster.Apply(ctx, fsm.MustCommand(fsm.TypeSetAdminToken, fsm.SetAdminToken{Hash: hash}))
	if err != nil {
		return err
	}
	if errors.Is(res.Err, fsm.ErrConflict) {
		return nil // another leader won the race; its token stands
	}
	if err := os.WriteFile(n.AdminTokenFile(), []byte(token+"\n"), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(n.cfg.Out, "\nAdmin API token (shown once; also in %s):\n  %s\n\n", n.AdminTokenFile(), token)
	return nil
}

// adminTokenNote remembers which replicated admin token hash this node
// last checked its own token sources against, so each change is reported
// once (noteAdminToken).
type adminTokenNote struct {
	mu       sync.Mutex
	noted    string        // the hash last checked; guarded by mu
	restores atomic.Uint64 // fsm.Restores() when onApply last looked
}

// expect records h as checked: this node is about to make it the
// cluster's token, with its own sources matching.
func (a *adminTokenNote) expect(h string) {
	a.mu.Lock()
	a.noted = h
	a.mu.Unlock()
}

// noteAdminToken checks this node's own token sources against h, the
// replicated admin token hash, once per value of h: an --admin-token that
// differs, and a token in <data-dir>/admin-token that differs, are logged
// as warnings. The state's token stays the one that works; nothing is
// changed.
func (n *Node) noteAdminToken(h string) {
	n.adminTok.mu.Lock()
	defer n.adminTok.mu.Unlock()
	if h == "" || h == n.adminTok.noted {
		return
	}
	n.adminTok.noted = h
	if n.cfg.AdminToken != "" && admin.HashToken(n.cfg.AdminToken) != h {
		n.log.Warn("admin token: --admin-token (or OIDCD_ADMIN_TOKEN) does not match the cluster's admin token, which came from a restored backup, " +
			"another node's flag or a generated token; the cluster's token stays the one that works and this node's flag is ignored")
	}
	if fh, ok := n.tokenFileHash(); ok && fh != h {
		n.log.Warn("admin token: the token in the token file is no longer the cluster's admin token (a restored backup replaced it); "+
			"it answers 'invalid admin token'", "file", n.AdminTokenFile())
	}
}

// tokenFileHolds reports whether <data-dir>/admin-token holds the token
// whose hash is h.
func (n *Node) tokenFileHolds(h string) bool {
	fh, ok := n.tokenFileHash()
	return ok && fh == h
}

// tokenFileHash is the hash of the token in <data-dir>/admin-token; false
// when there is no such file.
func (n *Node) tokenFileHash() (string, bool) {
	tok, err := os.ReadFile(n.AdminTokenFile())
	if err != nil {
		return "", false
	}
	return admin.HashToken(strings.TrimSpace(string(tok))), true
}

// adminTokenApplied runs in onApply, on the FSM goroutine, possibly under
// the FSM's write lock (a restore): when the admin token hash may have
// changed (a SetAdminToken applied, or a snapshot installed, whether a
// restore on this leader or one sent by the leader), it checks this node's
// token sources against it in the background (noteAdminToken).
func (n *Node) adminTokenApplied(types []fsm.Type) {
	r := n.fsm.Restores()
	if n.adminTok.restores.Swap(r) == r && !slices.Contains(types, fsm.TypeSetAdminToken) {
		return
	}
	go func() {
		select {
		case <-n.closing:
			return
		default:
		}
		if h, err := n.fsm.State().AdminTokenHash(); err == nil {
			n.noteAdminToken(h)
		}
	}()
}

// Demo seed values, printed in the banner.
const (
	DemoOrgSlug  = "demo"
	DemoEmail    = "demo@example.com"
	DemoPassword = "demo-password"
	DemoClientID = "demo-rp"
	// DemoRedirectURI is where oidcd-demo-rp (internal/demorp) listens
	// for the code by default.
	DemoRedirectURI = "http://127.0.0.1:9090/callback"
)

// demoURIs returns the demo client's redirect URIs (the callback and the
// post-logout page, which /logout accepts only as a registered redirect URI)
// and its back-channel logout URI: demo-rp's signed-out and
// backchannel-logout, beside its callback.
func demoURIs(callback string) (redirects []string, backchannel string, err error) {
	u, err := url.Parse(callback)
	if err != nil || !u.IsAbs() {
		return nil, "", fmt.Errorf("demo redirect URI %q: must be an absolute URI", callback)
	}
	signedOut := u.ResolveReference(&url.URL{Path: "signed-out"}).String()
	return []string{callback, signedOut}, u.ResolveReference(&url.URL{Path: "backchannel-logout"}).String(), nil
}

func (n *Node) seedDemo(ctx context.Context) error {
	st := n.fsm.State()
	if _, err := st.Client(DemoClientID); err == nil {
		n.demoBanner("Demo data (created earlier)", n.demoSignIn(ctx))
		return nil
	}
	redirects, backchannel, err := demoURIs(n.cfg.DemoRedirectURI)
	if err != nil {
		return err
	}
	now := n.cfg.Now().UTC()
	orgID := uuid.NewString()
	hash, err := n.hasher.Hash(ctx, DemoPassword)
	if err != nil {
		return err
	}
	user := fsm.User{ID: uuid.NewString(), Email: DemoEmail, EmailVerified: true, PasswordHash: hash, CreatedAt: now, UpdatedAt: now}
	cmds := []fsm.Command{
		fsm.MustCommand(fsm.TypeCreateOrg, fsm.CreateOrg{ID: orgID, Slug: DemoOrgSlug, Name: "Demo organization", CreatedAt: now}),
		fsm.MustCommand(fsm.TypeCreateUser, fsm.CreateUser{User: user}),
		fsm.MustCommand(fsm.TypeCreateMembership, fsm.CreateMembership{Membership: fsm.Membership{
			ID: uuid.NewString(), UserID: user.ID, OrgID: orgID, Status: fsm.MembershipActive, CreatedAt: now, UpdatedAt: now}}),
		fsm.MustCommand(fsm.TypeCreateClient, fsm.PutClient{Create: true, Client: fsm.Client{
			ID: DemoClientID, Name: "Demo relying party", Type: fsm.ClientPublic,
			RedirectURIs: redirects, Scopes: []string{"openid", "email", "profile"}, BackchannelLogoutURI: backchannel,
			OrganizationID: orgID, AccessTokenTTL: 600, CreatedAt: now, UpdatedAt: now}}),
	}
	for _, c := range cmds {
		res, err := n.cluster.Apply(ctx, c)
		if err != nil {
			return err
		}
		if res.Err != nil && !errors.Is(res.Err, fsm.ErrConflict) {
			return fmt.Errorf("demo seed %s: %w", c.Type, res.Err)
		}
	}
	n.demoBanner("Demo data created", DemoEmail+" / "+DemoPassword)
	return nil
}

// demoSignIn is the demo person's sign-in as the banner shows it on a
// later start: with the demo password only while it is still theirs (the
// stored hash verifies it), since a person who changed it on /account
// should not be told the old one works.
func (n *Node) demoSignIn(ctx context.Context) string {
	u, err := n.fsm.State().UserByEmail(DemoEmail)
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return DemoEmail + " (deleted since the demo made it)"
	case err != nil:
		return DemoEmail
	}
	if ok, err := n.hasher.Verify(ctx, DemoPassword, u.PasswordHash); err == nil && ok {
		return DemoEmail + " / " + DemoPassword
	}
	return DemoEmail + " (its password was changed from the demo's)"
}

// demoBanner prints the demo sign-in, on every start with --demo, and
// without --kek-file a note on secrets at rest: in a demo they are
// stored unencrypted, which production should not do (loadKEK logs the
// same at info).
func (n *Node) demoBanner(title, person string) {
	note := ""
	if n.cfg.KEKFile == "" {
		note = fmt.Sprintf("  note: demo secrets (signing keys, the browser key) are stored unencrypted in %s;\n"+
			"    fine for a demo; in production give --kek-file: docs/operators/install.md, step 4,\n"+
			"    and SECURITY.md, \"Secrets at rest\"\n", n.cfg.DataDir)
	}
	fmt.Fprintf(n.cfg.Out, "%s:\n  organization %q, person %s\n  public client %q, redirect URI %s (oidcd-demo-rp)\n  discovery: %s/.well-known/openid-configuration\n%s%s\n",
		title, DemoOrgSlug, person, DemoClientID, n.cfg.DemoRedirectURI, n.cfg.Issuer, n.demoMailLine(), note)
}
