package cli

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// `oidcd admin login` signs a person in through the provider itself, with
// the built-in public client and PKCE (RFC 8252, a native app): it prints
// the authorization URL, waits on a loopback port for the browser's
// redirect to /callback, checks state, redeems the code and keeps the
// access token for --addr in the credentials file. `logout` revokes that
// token and forgets it.

// LoginClientID is the built-in client the CLI signs in with.
const LoginClientID = "oidcd-admin"

// DefaultLoginWait is how long login waits for the browser.
const DefaultLoginWait = 5 * time.Minute

// discovery is what login reads of the provider's discovery document.
type discovery struct {
	Issuer        string `json:"issuer"`
	Authorization string `json:"authorization_endpoint"`
	Token         string `json:"token_endpoint"`
	Revocation    string `json:"revocation_endpoint"`
}

func loginCmd(fs *flag.FlagSet) func(in *inv) (*request, error) {
	issuer := fs.String("issuer", "", "the provider's issuer `URL` (default: read from --addr's /.well-known/openid-configuration; give it when --addr is a separate --admin-addr listener)")
	wait := fs.Duration("wait", DefaultLoginWait, "how long to wait for the browser, a `duration`")
	port := fs.Int("port", 0, "loopback `port` to wait on (default: a free one)")
	return func(in *inv) (*request, error) {
		if *wait <= 0 {
			return nil, errUsage("--wait must be positive")
		}
		if *port < 0 || *port > 65535 {
			return nil, errUsage("--port must be 0 to 65535")
		}
		iss := strings.TrimRight(strings.TrimSpace(*issuer), "/")
		if in.given("issuer") {
			if u, err := url.Parse(iss); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
				return nil, errUsage("--issuer %q: want an http(s) URL", *issuer)
			}
		}
		l := &loginRun{issuer: iss, wait: *wait, port: *port, env: in.env}
		return &request{run: l.run}, nil
	}
}

func logoutCmd(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(in *inv) (*request, error) {
		env := in.env
		return &request{run: func(ctx context.Context, c *conn, asJSON bool, stdout, stderr io.Writer) int {
			return logout(ctx, c, env, stdout, stderr)
		}}, nil
	}
}

// loginRun is one `oidcd admin login`.
type loginRun struct {
	issuer string
	wait   time.Duration
	port   int
	env    func(string) string
}

// callback is what the browser brought to the loopback listener.
type callback struct {
	code string
	err  string
}

func (l *loginRun) run(ctx context.Context, c *conn, asJSON bool, stdout, stderr io.Writer) int {
	addr := strings.TrimSuffix(c.base, APIPrefix)
	d, code := l.discover(ctx, c, addr, stderr)
	if code != ExitOK {
		return code
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(l.port)))
	if err != nil {
		fmt.Fprintf(stderr, "error: cannot wait for the browser on a loopback port: %v\n", err)
		return ExitServerError
	}
	redirect := "http://" + ln.Addr().String() + "/callback"
	state, verifier := randomString(), randomString()
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"client_id": {LoginClientID}, "redirect_uri": {redirect}, "response_type": {"code"}, "scope": {"openid"},
		"state": {state}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
	}
	authURL := d.Authorization + "?" + q.Encode()
	if strings.Contains(d.Authorization, "?") {
		authURL = d.Authorization + "&" + q.Encode()
	}

	got := make(chan callback, 1)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: callbackHandler(state, d.Issuer, got)}
	go srv.Serve(ln)
	// Shutdown, not Close: the handler delivers the answer before it
	// writes its page, and the browser should see that page even when
	// the answer ends the login at once (a refused sign-in).
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()

	fmt.Fprintf(stderr, "Open this address in a browser and sign in:\n\n  %s\n\nWaiting for the browser on %s (at most %s) ...\n", authURL, redirect, l.wait)
	var cb callback
	select {
	case cb = <-got:
	case <-time.After(l.wait):
		fmt.Fprintf(stderr, "error: no sign-in within %s (--wait)\n", l.wait)
		return ExitAuth
	case <-ctx.Done():
		fmt.Fprintln(stderr, "error: interrupted")
		return ExitAuth
	}
	if cb.err != "" {
		fmt.Fprintf(stderr, "error: the sign-in failed: %s\n", clean(cb.err))
		if cb.err == noSecondFactor {
			// The same next step as the browser's page.
			fmt.Fprintf(stderr, "\nAdministrators sign in with a second factor, and this account has none yet.\n%s\n\n  %s\n\n%s\n",
				strings.TrimSuffix(enrolBefore, " "), enrolURL(d.Issuer), strings.TrimPrefix(enrolAfter, ", "))
		}
		return ExitAuth
	}
	tok, code := redeem(ctx, c, d.Token, cb.code, redirect, verifier, stderr)
	if code != ExitOK {
		return code
	}
	now := time.Now().UTC().Truncate(time.Second)
	stored := login{Issuer: d.Issuer, AccessToken: tok.AccessToken, ExpiresAt: now.Add(time.Duration(tok.ExpiresIn) * time.Second),
		RevocationURL: d.Revocation, ObtainedAt: now}
	path, err := updateLogin(l.env, addr, &stored)
	if err != nil {
		fmt.Fprintf(stderr, "error: signed in, but the token could not be kept: %v\n", err)
		return ExitServerError
	}
	if asJSON {
		b, _ := json.Marshal(map[string]any{"addr": addr, "issuer": d.Issuer, "expires_at": stored.ExpiresAt, "credentials_file": path})
		stdout.Write(prettyJSON(b))
		return ExitOK
	}
	fmt.Fprintf(stdout, "signed in to %s until %s\ntoken kept in %s\n", addr, stored.ExpiresAt.Local().Format(time.RFC3339), path)
	return ExitOK
}

// discover reads the provider's endpoints: from --issuer when given, else
// from the node at --addr (the public listener serves the document).
func (l *loginRun) discover(ctx context.Context, c *conn, addr string, stderr io.Writer) (discovery, int) {
	base := addr
	if l.issuer != "" {
		base = l.issuer
	}
	var d discovery
	a, err := get(ctx, c, base+"/.well-known/openid-configuration")
	if err != nil {
		fmt.Fprintf(stderr, "error: %s\n", c.transportError(err))
		return d, ExitUnreachable
	}
	if a.status == http.StatusNotFound && l.issuer == "" {
		fmt.Fprintf(stderr, "error: %s serves no discovery document (a separate --admin-addr listener?): give --issuer URL, the provider's public address\n", clean(addr))
		return d, ExitUsage
	}
	if a.status != http.StatusOK || json.Unmarshal(a.body, &d) != nil || d.Authorization == "" || d.Token == "" || d.Issuer == "" {
		fmt.Fprintf(stderr, "error: HTTP %d: no usable discovery document at %s\n", a.status, clean(base))
		return d, ExitServerError
	}
	if l.issuer != "" && strings.TrimRight(d.Issuer, "/") != l.issuer {
		fmt.Fprintf(stderr, "error: the discovery document names the issuer %q, not %q\n", clean(d.Issuer), clean(l.issuer))
		return d, ExitServerError
	}
	return d, ExitOK
}

// callbackHandler answers the browser on the loopback listener. A request
// whose state is not this login's is refused and changes nothing (another
// local program cannot end the wait); the first with the right state
// delivers its code or error on got. iss, when present (RFC 9207), must
// be the provider's.
func callbackHandler(state, issuer string, got chan<- callback) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
			page(w, http.StatusBadRequest, loginView{Title: "Not this sign-in", Message: "This sign-in is not the one oidcd admin login is waiting for.",
				Hint: "Start again from the address the terminal shows."})
			return
		}
		var cb callback
		switch {
		case q.Has("iss") && q.Get("iss") != issuer:
			cb.err = "the answer came from another issuer (" + q.Get("iss") + ")"
		case q.Get("error") != "":
			cb.err = q.Get("error")
			if d := q.Get("error_description"); d != "" {
				cb.err += ": " + d
			}
		case q.Get("code") == "":
			cb.err = "the answer holds no code"
		default:
			cb.code = q.Get("code")
		}
		select {
		case got <- cb:
		default: // an answer was delivered already
			page(w, http.StatusConflict, loginView{Title: "Already answered", Message: "oidcd admin login has its answer already; close this window."})
			return
		}
		if cb.err != "" {
			page(w, http.StatusOK, failedView(cb.err, issuer))
			return
		}
		page(w, http.StatusOK, signedInView)
	})
	return mux
}

// tokenAnswer is what login reads of the token endpoint's answer.
type tokenAnswer struct {
	AccessToken string `json:"access_token"`
	ExpiresIn   int64  `json:"expires_in"`
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

// redeem exchanges code at the token endpoint.
func redeem(ctx context.Context, c *conn, endpoint, code, redirect, verifier string, stderr io.Writer) (tokenAnswer, int) {
	var t tokenAnswer
	a, err := postForm(ctx, c, endpoint, url.Values{
		"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect},
		"code_verifier": {verifier}, "client_id": {LoginClientID},
	})
	if err != nil {
		fmt.Fprintf(stderr, "error: %s\n", c.transportError(err))
		return t, ExitUnreachable
	}
	_ = json.Unmarshal(a.body, &t)
	switch {
	case a.status == http.StatusOK && t.AccessToken != "" && t.ExpiresIn > 0:
		return t, ExitOK
	case t.Error != "":
		fmt.Fprintf(stderr, "error: the token endpoint answered %d %s: %s\n", a.status, clean(t.Error), clean(t.Description))
		return t, ExitAuth
	default:
		fmt.Fprintf(stderr, "error: HTTP %d: no token in the token endpoint's answer\n", a.status)
		return t, ExitServerError
	}
}

// logout revokes the token kept for --addr (best effort) and forgets it.
func logout(ctx context.Context, c *conn, env func(string) string, stdout, stderr io.Writer) int {
	addr := strings.TrimSuffix(c.base, APIPrefix)
	l, ok, err := storedLogin(env, addr)
	if err != nil {
		fmt.Fprintf(stderr, "error: credentials file: %v\n", err)
		return ExitServerError
	}
	if !ok {
		fmt.Fprintf(stdout, "not signed in to %s\n", addr)
		return ExitOK
	}
	if l.RevocationURL != "" && time.Now().Before(l.ExpiresAt) {
		a, err := postForm(ctx, c, l.RevocationURL, url.Values{
			"token": {l.AccessToken}, "token_type_hint": {"access_token"}, "client_id": {LoginClientID},
		})
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "warning: the token could not be revoked (%s); it stays valid until %s\n", c.transportError(err), l.ExpiresAt.Local().Format(time.RFC3339))
		case a.status != http.StatusOK:
			fmt.Fprintf(stderr, "warning: the token could not be revoked (HTTP %d); it stays valid until %s\n", a.status, l.ExpiresAt.Local().Format(time.RFC3339))
		}
	}
	if _, err := updateLogin(env, addr, nil); err != nil {
		fmt.Fprintf(stderr, "error: credentials file: %v\n", err)
		return ExitServerError
	}
	fmt.Fprintf(stdout, "signed out of %s\n", addr)
	return ExitOK
}

// get and postForm are the protocol calls of login and logout: no admin
// token, the connection's timeout.
func get(ctx context.Context, c *conn, u string) (*answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	return send(c, req)
}

func postForm(ctx context.Context, c *conn, u string, form url.Values) (*answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	return send(c, req)
}

func send(c *conn, req *http.Request) (*answer, error) {
	req.Header.Set("User-Agent", "oidcd-admin")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return readAnswer(resp, "")
}

// randomString is 32 random bytes in unpadded base64url: a state, or a
// PKCE verifier of 43 characters.
func randomString() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
