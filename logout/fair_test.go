package logout

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
)

// hungReceiver is a back-channel endpoint that accepts every POST and
// never answers until the test ends, as a receiver stuck on a dead
// database would.
type hungReceiver struct {
	srv *httptest.Server

	mu          sync.Mutex
	inFlight    int
	maxInFlight int
}

func newHungReceiver(t *testing.T) *hungReceiver {
	t.Helper()
	release := make(chan struct{})
	r := &hungReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		r.inFlight++
		r.maxInFlight = max(r.maxInFlight, r.inFlight)
		r.mu.Unlock()
		<-release // not even the sender's cancel ends it
		r.mu.Lock()
		r.inFlight--
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close) // runs after release: Close waits for the handlers
	t.Cleanup(func() { close(release) })
	return r
}

func (r *hungReceiver) held() (now, most int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight, r.maxInFlight
}

// addClient registers a client of org A whose back-channel URI is uri.
func (h *harness) addClient(id, uri string) {
	h.t.Helper()
	now := h.clock.Now()
	h.apply(fsm.TypeCreateClient, fsm.PutClient{Create: true, Client: fsm.Client{
		ID: id, Name: id, Type: fsm.ClientPublic, Scopes: []string{"openid"}, RedirectURIs: []string{hRedirect},
		AccessTokenTTL: 600, OrganizationID: hOrgA, BackchannelLogoutURI: uri, CreatedAt: now, UpdatedAt: now}})
}

// queueLogouts signs a person in to client and out again, n times: n
// deliveries to client, oldest first.
func (h *harness) queueLogouts(client string, n int) {
	h.t.Helper()
	for range n {
		sess := h.ssoSession(hUser2)
		h.signIn(sess, hUser2, client, hOrgA)
		h.logoutAll(sess)
	}
}

// TestHungReceiverDelaysOnlyItsOwnTokens: a client whose receiver accepts
// the POST and never answers, with more of its deliveries queued ahead
// than one page (and than one look) of the sender's scan reads, holds at
// most its own slots; an unrelated person's logout token for a healthy
// app goes out within a second.
func TestHungReceiverDelaysOnlyItsOwnTokens(t *testing.T) {
	cases := []struct {
		name      string
		clients   int // hung clients, all on the one hung host
		queued    int // deliveries queued for each
		scanLimit int
		scanPages int
		beyond    int           // the queue ahead must hold more than this
		tick      time.Duration // 0: the harness's
		wantHeld  int           // requests the hung host holds at once
	}{
		{"more than a page ahead", 1, 40, 8, 16, 8, 0, DefaultPerClient},
		{"more than one look ahead", 1, 40, 4, 2, 4 * 2, 0, DefaultPerClient},
		{"more than one look ahead, with the production tick", 1, 30, 4, 3, 4 * 3, time.Second, DefaultPerClient},
		{"two clients on one hung host", 2, 20, 4, 2, 4 * 2, 0, DefaultPerHost},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.s.sendTimeout = DefaultSendTimeout // a hung attempt holds its slot as long as in production
			h.s.scanLimit, h.s.scanPages = c.scanLimit, c.scanPages
			if c.tick != 0 {
				h.s.tick = c.tick
			}
			hung := newHungReceiver(t)
			for i := range c.clients {
				id := "hung-app-" + string(rune('a'+i))
				h.addClient(id, hung.srv.URL+"/bcl/"+id)
				h.queueLogouts(id, c.queued)
			}
			if ds, _ := h.applier.State().PendingDeliveries(1 << 20); len(ds) <= c.beyond {
				t.Fatalf("queued %d, want more than %d", len(ds), c.beyond)
			}
			h.runSender()
			waitFor(t, "the hung receiver to hold its slots", func() bool { n, _ := hung.held(); return n >= c.wantHeld })

			sess := h.ssoSession(hUser)
			h.signIn(sess, hUser, hAppA, hOrgA)
			start := time.Now()
			ended := h.logoutAll(sess)
			var took time.Duration
			for deadline := start.Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
				if got := h.recvA.received(); len(got) > 0 {
					took = time.Since(start)
					if jti := claimsOf(got[0])["jti"]; jti != ended.Deliveries[0].ID {
						t.Fatalf("healthy app: got jti %v, want %s", jti, ended.Deliveries[0].ID)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("healthy app: no token %v after its logout, want one within 1s", time.Since(start).Round(time.Millisecond))
				}
			}
			t.Logf("healthy app's token after %v", took)
			if took > time.Second {
				t.Fatalf("healthy app: token after %v, want within 1s", took)
			}
			if _, most := hung.held(); most != c.wantHeld {
				t.Fatalf("hung host: got %d requests held at once, want %d", most, c.wantHeld)
			}
		})
	}
}

func TestSlots(t *testing.T) {
	s := newSlots(3, 2, 2)
	steps := []struct {
		do           string // "take", "release" or "" (only check)
		client, host string
		wantFree     bool // free(client, host) after the step
		wantFull     bool
	}{
		{"", "a", "h1", true, false},
		{"take", "a", "h1", true, false},
		{"take", "a", "h1", false, false}, // client a at its cap
		{"", "b", "h1", false, false},     // host h1 at its cap
		{"", "b", "h2", true, false},
		{"take", "b", "h2", false, true}, // the pool is full
		{"", "c", "h3", false, true},
		{"release", "a", "h1", true, false},
		{"", "c", "h1", true, false},
		{"release", "a", "h1", true, false},
		{"release", "b", "h2", true, false},
	}
	for i, st := range steps {
		switch st.do {
		case "take":
			s.take(st.client, st.host)
		case "release":
			s.release(st.client, st.host)
		}
		if got := s.free(st.client, st.host); got != st.wantFree {
			t.Fatalf("step %d %s %s/%s: free got %v, want %v", i, st.do, st.client, st.host, got, st.wantFree)
		}
		if got := s.full(); got != st.wantFull {
			t.Fatalf("step %d: full got %v, want %v", i, got, st.wantFull)
		}
	}
	if s.n != 0 || len(s.clients) != 0 || len(s.hosts) != 0 {
		t.Fatalf("after releasing all: got %d in flight, clients %v, hosts %v", s.n, s.clients, s.hosts)
	}
}

func TestReceiverHost(t *testing.T) {
	cases := []struct{ uri, want string }{
		{"https://rp.example/bcl", "rp.example:443"},
		{"https://RP.example:443/other", "rp.example:443"},
		{"http://rp.example/bcl", "rp.example:80"},
		{"https://rp.example:8443/bcl", "rp.example:8443"},
		{"http://127.0.0.1:9000/a", "127.0.0.1:9000"},
		{"https://[::1]/bcl", "[::1]:443"},
		{"not a uri", "not a uri"},
		{"://bad", "://bad"},
	}
	for _, c := range cases {
		t.Run(c.uri, func(t *testing.T) {
			if got := receiverHost(c.uri); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}
