package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/testcluster"
)

// credentialChecks reads oidcd_credential_checks_total{kind} from /metrics.
func (n *liveNode) credentialChecks(t *testing.T, kind string) int {
	t.Helper()
	resp, err := http.Get(n.issuer + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	prefix := `oidcd_credential_checks_total{kind="` + kind + `"} `
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int(f)
		}
	}
	return 0
}

// signInPage opens a fresh sign-in form for s's client in browser b.
func (s *site) signInPage(t *testing.T, b *testcluster.Browser) *testcluster.Page {
	t.Helper()
	u := s.rp.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(pkceVerifier), gooidc.Nonce("nonce-0123456789"))
	p := b.Follow(b.Get(u), s.n.issuer)
	if !strings.Contains(p.Body, `name="password"`) {
		t.Fatalf("no sign-in form: %d\n%s", p.Status, p.Body)
	}
	return p
}

// TestConcurrentGuessesAreCountedBeforeTheyAreChecked: thirty wrong
// passwords posted at the same moment, with one sealed sign-in step and
// with thirty fresh forms, are evaluated at most ten times (the limit per
// account and address), and the right password sent after them is
// refused without being checked: the attempt is reserved in the state
// machine before argon2id runs.
func TestConcurrentGuessesAreCountedBeforeTheyAreChecked(t *testing.T) {
	n := startLiveNode(t)
	s := provisionSite(t, n)
	const guesses, limit = 30, 10
	fire := func(t *testing.T, forms func(i int) (*testcluster.Browser, *testcluster.Page)) map[int]int {
		t.Helper()
		type shot struct {
			b *testcluster.Browser
			p *testcluster.Page
		}
		shots := make([]shot, guesses)
		for i := range shots {
			shots[i].b, shots[i].p = forms(i)
		}
		var mu sync.Mutex
		codes := map[int]int{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range shots {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				p := shots[i].b.Submit(shots[i].p, map[string]string{"email": s.email, "password": "wrong guess " + strconv.Itoa(i)}, "method", "password")
				mu.Lock()
				codes[p.Status]++
				mu.Unlock()
			}()
		}
		close(start)
		wg.Wait()
		return codes
	}
	check := func(t *testing.T, before int, codes map[int]int) {
		t.Helper()
		evaluated := n.credentialChecks(t, "password") - before
		if evaluated > limit || codes[http.StatusTooManyRequests] < guesses-limit {
			t.Fatalf("%d concurrent guesses: %d evaluated, answers %v; want at most %d evaluated", guesses, evaluated, codes, limit)
		}
		t.Logf("%d evaluated, answers %v", evaluated, codes)
	}

	t.Run("one form", func(t *testing.T) {
		b := testcluster.NewBrowser(t)
		form := s.signInPage(t, b)
		before := n.credentialChecks(t, "password")
		check(t, before, fire(t, func(int) (*testcluster.Browser, *testcluster.Page) { return b, form }))
		// The right password is refused now, unchecked.
		p := b.Submit(s.signInPage(t, b), map[string]string{"email": s.email, "password": s.password}, "method", "password")
		if p.Status != http.StatusTooManyRequests {
			t.Fatalf("the right password after the limit: got %d, want 429", p.Status)
		}
	})

	// Unlock through the admin API, then fresh forms, one browser each.
	n.admin(t, 204, "DELETE", "/users/"+s.user+"/lockouts", nil, nil)
	t.Run("fresh forms", func(t *testing.T) {
		before := n.credentialChecks(t, "password")
		check(t, before, fire(t, func(int) (*testcluster.Browser, *testcluster.Page) {
			b := testcluster.NewBrowser(t)
			return b, s.signInPage(t, b)
		}))
	})

	// The attacker's address is locked out of the account; the owner, at
	// another address (127.0.0.2), still signs in (after the soft delay).
	owner := testcluster.NewBrowser(t)
	tr := testcluster.LoopbackTransport()
	tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext
	owner.Client.Transport = tr
	p := owner.Submit(s.signInPage(t, owner), map[string]string{"email": s.email, "password": s.password}, "method", "password")
	if q := callbackQuery(t, s, p); q.Get("code") == "" {
		t.Fatalf("the owner from another address: %v", q)
	}
	b := testcluster.NewBrowser(t)
	if p := b.Submit(s.signInPage(t, b), map[string]string{"email": s.email, "password": s.password}, "method", "password"); p.Status != http.StatusTooManyRequests {
		t.Fatalf("the attacker's address, right password: got %d, want 429", p.Status)
	}
	n.admin(t, 204, "DELETE", "/users/"+s.user+"/lockouts", nil, nil)
	p = b.Submit(s.signInPage(t, b), map[string]string{"email": s.email, "password": s.password}, "method", "password")
	if q := callbackQuery(t, s, p); q.Get("code") == "" {
		t.Fatalf("the right password after an unlock: %v", q)
	}
}

// fireAt runs shot n times at the same moment and returns the answers by
// status.
func fireAt(t *testing.T, n int, shot func(i int) int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			st := shot(i)
			mu.Lock()
			codes[st]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return codes
}

// TestConcurrentCodeGuessesAreCountedBeforeTheyAreChecked: the second
// step's authenticator codes, the text-message code and the per-address
// rule hold under concurrency too. Twenty wrong codes posted at once on
// one second-factor form, and twenty on one text-message code page, are
// evaluated at most five times each (the per-person code limit); sixty
// password attempts at once from one address, each for another unknown
// account, are evaluated at most fifty times (the per-address limit).
func TestConcurrentCodeGuessesAreCountedBeforeTheyAreChecked(t *testing.T) {
	n := startLiveNode(t)
	s := provisionSite(t, n)
	n.admin(t, 201, "POST", "/users/"+s.user+"/totp", nil, nil)

	t.Run("authenticator codes", func(t *testing.T) {
		b := testcluster.NewBrowser(t)
		page := s.authorize(t, b, "", oauth2.SetAuthURLParam("acr_values", acrMFA))
		if !strings.Contains(page.Body, `value="otp"`) {
			t.Fatalf("no second-factor page: %d", page.Status)
		}
		before := n.credentialChecks(t, "code")
		codes := fireAt(t, 20, func(int) int {
			return b.Submit(page, map[string]string{"code": "000000"}, "method", "otp").Status
		})
		got := n.credentialChecks(t, "code") - before
		if got > 5 || got == 0 || codes[http.StatusTooManyRequests] < 15 {
			t.Fatalf("20 concurrent codes: %d evaluated, answers %v; want 1 to 5", got, codes)
		}
		t.Logf("%d evaluated, answers %v", got, codes)
	})
	n.admin(t, 204, "DELETE", "/users/"+s.user+"/lockouts", nil, nil)
	t.Run("text-message code", func(t *testing.T) {
		b := testcluster.NewBrowser(t)
		u := s.rp.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(pkceVerifier), gooidc.Nonce("nonce-0123456789"))
		first := b.Follow(b.Get(u), n.issuer)
		codePage := b.Follow(b.Submit(first, map[string]string{"phone": s.phone}, "method", "sms"), n.issuer)
		if !strings.Contains(codePage.Body, `autocomplete="one-time-code"`) {
			t.Fatalf("no code page: %d", codePage.Status)
		}
		before := n.credentialChecks(t, "code")
		codes := fireAt(t, 20, func(int) int {
			return b.Submit(codePage, map[string]string{"code": "000000"}, "", "").Status
		})
		got := n.credentialChecks(t, "code") - before
		if got > 5 || got == 0 || codes[http.StatusTooManyRequests] < 15 {
			t.Fatalf("20 concurrent text-message codes: %d evaluated, answers %v; want 1 to 5", got, codes)
		}
		t.Logf("%d evaluated, answers %v", got, codes)
	})
	t.Run("per address", func(t *testing.T) {
		b := testcluster.NewBrowser(t)
		form := s.signInPage(t, b)
		before := n.credentialChecks(t, "password")
		codes := fireAt(t, 60, func(i int) int {
			return b.Submit(form, map[string]string{"email": fmt.Sprintf("nobody%d@example.com", i), "password": "x"}, "method", "password").Status
		})
		got := n.credentialChecks(t, "password") - before
		if got > 50 || got == 0 || codes[http.StatusTooManyRequests] < 10 {
			t.Fatalf("60 concurrent attempts from one address: %d evaluated, answers %v; want at most 50", got, codes)
		}
		t.Logf("%d evaluated, answers %v", got, codes)
	})
}
