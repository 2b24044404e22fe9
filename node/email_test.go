package node_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/mail"
	"github.com/oidcd/oidcd/internal/testkit/smtptest"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// heldRelay is a TCP proxy in front of a relay that holds every
// connection silent (no greeting) until Release: a relay that hangs.
type heldRelay struct {
	ln      net.Listener
	target  string
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	conns   []net.Conn
	held    int // connections accepted before Release
}

func newHeldRelay(t *testing.T, target string) *heldRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &heldRelay{ln: ln, target: target, release: make(chan struct{})}
	done := make(chan struct{})
	go r.serve(done)
	t.Cleanup(func() {
		ln.Close()
		r.Release()
		r.mu.Lock()
		for _, c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
		<-done
	})
	return r
}

func (r *heldRelay) Addr() string { return r.ln.Addr().String() }

// Release lets every held and later connection through to the relay.
func (r *heldRelay) Release() { r.once.Do(func() { close(r.release) }) }

func (r *heldRelay) heldCount() int { r.mu.Lock(); defer r.mu.Unlock(); return r.held }

func (r *heldRelay) serve(done chan struct{}) {
	defer close(done)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		r.conns = append(r.conns, c)
		select {
		case <-r.release:
		default:
			r.held++
		}
		r.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			<-r.release
			up, err := net.DialTimeout("tcp", r.target, 5*time.Second)
			if err != nil {
				return
			}
			defer up.Close()
			go func() { io.Copy(up, c); up.Close() }()
			io.Copy(c, up)
		}()
	}
}

// writeKEKFile writes a fresh key-encryption key (base64 of 32 bytes,
// mode 0600) for every node of a cluster to share.
func writeKEKFile(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	rand.Read(b)
	p := filepath.Join(t.TempDir(), "kek")
	if err := os.WriteFile(p, []byte(base64.StdEncoding.EncodeToString(b)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// outboxLines reads the outbox file: the lines by recipient.
func outboxLines(t *testing.T, path string) map[string][]mail.OutboxLine {
	t.Helper()
	out := map[string][]mail.OutboxLine{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l mail.OutboxLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("outbox line %q: %v", sc.Text(), err)
		}
		out[l.To] = append(out[l.To], l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// outgoing composes and seals one password reset to addr with a link of
// its own.
func outgoing(t *testing.T, k *kek.KEK, issuer, addr string) (fsm.OutgoingEmail, string) {
	t.Helper()
	link := issuer + "/password/reset/token-" + strings.ReplaceAll(addr, "@", ".")
	m, err := email.Compose(email.PasswordReset, "en", email.Data{Site: email.Site(issuer), Link: link, Expires: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	o, err := email.Outgoing(k, addr, fsm.EmailPasswordReset, "en", "", m)
	if err != nil {
		t.Fatal(err)
	}
	return o, link
}

// TestEmailDeliveredWhenTheLeaderDies: messages committed through a
// follower, the leader killed right after the commit is acknowledged
// while the relay hangs (so the old leader cannot have sent them), then
// again with the relay answering: every message reaches the relay (a
// real Exim, through STARTTLS with its CA) and the outbox file shared by
// the nodes at least once, each with its own link, and every surviving
// node records each one sent, its body dropped.
func TestEmailDeliveredWhenTheLeaderDies(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{Username: "oidcd", Password: "relay-secret"})
	relay := newHeldRelay(t, srv.Addr())
	outbox := filepath.Join(t.TempDir(), "outbox.jsonl")
	kekFile := writeKEKFile(t)
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(_ int, cfg *node.Config) {
		cfg.SMTPURL = "smtp://oidcd:relay-secret@" + relay.Addr()
		cfg.SMTPFrom = "Identité <id@example.com>"
		cfg.SMTPCAFile = srv.CAFile
		cfg.EmailOutbox = outbox
		cfg.KEKFile = kekFile
	}})
	k := c.Node(0).KEK()
	links := map[string]string{} // address -> link
	ctx := context.Background()

	commitThenKill := func(round int, n int) {
		t.Helper()
		leader := c.WaitNewLeader()
		follower := (leader + 1) % 3
		var es []fsm.OutgoingEmail
		for i := range n {
			addr := fmt.Sprintf("person-%d-%d@example.com", round, i)
			o, link := outgoing(t, k, c.Issuer(), addr)
			es = append(es, o)
			links[addr] = link
		}
		if res, err := c.Node(follower).Cluster().Apply(ctx, fsm.MustCommand(fsm.TypeEnqueueEmail, fsm.EnqueueEmail{Emails: es, At: time.Now()})); err != nil || res.Err != nil {
			t.Fatalf("round %d: commit through follower %d: %v %v", round, follower, err, res.Err)
		}
		c.Kill(leader) // right after the acknowledgement
		c.WaitNewLeader()
		c.Restart(leader)
	}
	waitDelivered := func(what string) {
		t.Helper()
		waitUntil(t, what, 30*time.Second, func() bool {
			lines := outboxLines(t, outbox)
			for addr := range links {
				if len(lines[addr]) == 0 {
					return false
				}
			}
			return true
		})
	}

	// Round 1: the relay hangs, so the leader that took the commit cannot
	// deliver before it dies; the next one must.
	commitThenKill(1, 8)
	if n := len(outboxLines(t, outbox)); n != 0 {
		t.Fatalf("%d messages in the outbox while the relay hangs", n)
	}
	relay.Release()
	waitDelivered("round 1 delivered by the next leader")
	if relay.heldCount() == 0 {
		t.Error("no connection reached the hanging relay: the old leader never tried")
	}
	// Round 2: the relay answers; whatever the old leader managed before
	// it died, the rest is the next leader's.
	commitThenKill(2, 8)
	waitDelivered("round 2 delivered")

	received := srv.Messages(len(links), 30*time.Second)
	byRcpt := map[string]int{}
	for _, m := range received {
		for _, r := range m.Rcpt {
			byRcpt[r]++
		}
		if !m.TLS || m.AuthUser != "oidcd" || m.Subject != "Reset your password for "+email.Site(c.Issuer()) {
			t.Errorf("received: TLS %v, user %q, subject %q", m.TLS, m.AuthUser, m.Subject)
		}
		if len(m.Rcpt) == 1 && !strings.Contains(m.Text, links[m.Rcpt[0]]) {
			t.Errorf("message to %s lacks its link %s", m.Rcpt[0], links[m.Rcpt[0]])
		}
	}
	lines := outboxLines(t, outbox)
	dups := 0
	for addr, link := range links {
		if byRcpt[addr] == 0 {
			t.Errorf("%s: nothing reached the relay", addr)
		}
		for _, l := range lines[addr] {
			if l.Link != link || l.Kind != fsm.EmailPasswordReset || l.Locale != "en" || !strings.Contains(l.Text, link) {
				t.Errorf("%s: outbox line %+v, want link %s", addr, l, link)
			}
		}
		dups += len(lines[addr]) - 1
	}
	t.Logf("%d messages, %d relay deliveries, %d outbox lines beyond one a message (at least once)", len(links), len(received), dups)

	// Every node, the restarted ones included, records each one sent.
	for i := range 3 {
		waitUntil(t, fmt.Sprintf("node %d records every message sent", i), 15*time.Second, func() bool {
			es, _, err := c.Node(i).FSM().State().Emails(fsm.Page{Page: 1, PageSize: 100})
			if err != nil || len(es) != len(links) {
				return false
			}
			for _, e := range es {
				if e.State != fsm.EmailSent || e.Body != nil || links[e.To] == "" {
					return false
				}
			}
			return true
		})
	}
}
