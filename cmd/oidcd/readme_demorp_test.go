package main

import (
	"bytes"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestOperatorGuideDemoRPStep follows the operator guide's "Sign in" step
// (docs/operators/install.md, step 8) as written: the client create
// command and the demo relying party's command line are read from there, the
// placeholders filled in (and 127.0.0.1:9090 moved to a free port), and
// a person signs in through the demo relying party.
func TestOperatorGuideDemoRPStep(t *testing.T) {
	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "operators", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	step := string(guide)
	if i := strings.Index(step, "8. **Sign in**"); i < 0 {
		t.Fatal("docs/operators/install.md: no step 8 \"Sign in\"")
	} else {
		step = step[i:]
	}
	if i := strings.Index(step, "\n9. "); i > 0 {
		step = step[:i]
	}
	create, rpLine := "", ""
	for _, l := range readmeCommands(step) {
		switch {
		case strings.HasPrefix(l, "oidcd admin client create "):
			create = l
		case strings.HasPrefix(l, "bin/oidcd-demo-rp "):
			rpLine = l
		}
	}
	if create == "" || rpLine == "" {
		t.Fatalf("docs/operators/install.md step 8 lacks the client create command or the demo-rp command line:\n%s", step)
	}

	k := newKillable(t)
	bin := builtBinary(t)
	rpBin := filepath.Join(filepath.Dir(bin), "oidcd-demo-rp")
	if out, err := exec.Command("go", "build", "-o", rpBin, "../oidcd-demo-rp").CombinedOutput(); err != nil {
		t.Fatalf("go build oidcd-demo-rp: %v\n%s", err, out)
	}
	env := map[string]string{"OIDCD_ADDR": k.issuer, "OIDCD_ADMIN_TOKEN": k.token}
	admin := func(stdin string, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(append([]string{"admin"}, args...), func(n string) string { return env[n] }, strings.NewReader(stdin), &out, &errb); code != 0 {
			t.Fatalf("oidcd admin %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
		}
		return out.String()
	}
	field := func(table, name string) string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + name + `\s+(\S+)`).FindStringSubmatch(table)
		if m == nil {
			t.Fatalf("no %s in\n%s", name, table)
		}
		return m[1]
	}
	org := regexp.MustCompile(`[0-9a-f-]{36}`).FindString(admin("", "org", "create", "--slug", "acme", "--name", "Acme"))
	const pw = "correct horse battery staple"
	user := regexp.MustCompile(`[0-9a-f-]{36}`).FindString(admin(pw+"\n", "user", "create", "--email", "ann@example.com", "--email-verified", "--password-stdin"))
	admin("", "membership", "create", "--user", user, "--org", org)

	rpAddr := freePorts(t, 1)[0]
	fill := strings.NewReplacer("<organization ID>", org, "<issuer>", k.issuer, "127.0.0.1:9090", rpAddr)
	args := shellWords(t, fill.Replace(create))
	clientID := field(admin("", args[2:]...), "client_id")

	rpArgs := shellWords(t, strings.NewReplacer("<its client_id>", clientID).Replace(fill.Replace(rpLine)))[1:]
	rp := exec.Command(rpBin, append(rpArgs, "--addr", rpAddr)...)
	var rpLog syncBuffer
	rp.Stdout, rp.Stderr = &rpLog, &rpLog
	if err := rp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, rp) })
	base := "http://" + rpAddr
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if res, err := http.Get(base + "/"); err == nil {
			res.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo relying party did not answer within 10 s\n%s", rpLog.String())
		}
	}
	body := signInThroughDemoRP(t, base, "ann@example.com", pw)
	if !strings.Contains(body, "Signed in as ann@example.com") {
		t.Fatalf("the demo relying party's page after sign-in lacks the person:\n%s\ndemo-rp log:\n%s", body, rpLog.String())
	}
}

// readmeCommands returns the commands of the sh blocks of text, each
// continuation line joined and comments dropped.
func readmeCommands(text string) []string {
	var out []string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(text, -1) {
		joined := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(block[1], "")
		for _, l := range strings.Split(joined, "\n") {
			if i := strings.Index(l, " #"); i >= 0 {
				l = l[:i]
			}
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}

// shellWords splits a command line on spaces, keeping "double-quoted"
// words whole.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	for _, m := range regexp.MustCompile(`"([^"]*)"|(\S+)`).FindAllStringSubmatch(line, -1) {
		if m[2] != "" {
			words = append(words, m[2])
		} else {
			words = append(words, m[1])
		}
	}
	return words
}

// signInThroughDemoRP signs in at the demo relying party at base as a
// browser does: its /login, the provider's sign-in form, the consent
// form, and back; it returns the relying party's page.
func signInThroughDemoRP(t *testing.T, base, email, password string) string {
	t.Helper()
	formRe := regexp.MustCompile(`(?s)<form method="post" action="([^"]*)">(.*?)</form>`)
	hiddenRe := regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 15 * time.Second}
	res, err := c.Get(base + "/login")
	for range 5 {
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		page, at := string(b), res.Request.URL
		if strings.HasPrefix(at.String(), base) {
			return page
		}
		m := formRe.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("%d at %s: no form\n%s", res.StatusCode, at, page)
		}
		form := url.Values{}
		for _, h := range hiddenRe.FindAllStringSubmatch(m[2], -1) {
			form.Set(h[1], html.UnescapeString(h[2]))
		}
		switch {
		case strings.Contains(m[2], `name="password"`):
			form.Set("email", email)
			form.Set("password", password)
			form.Set("method", "password")
		case strings.Contains(m[2], `name="decision"`):
			form.Set("decision", "allow")
		}
		action, _ := at.Parse(html.UnescapeString(m[1]))
		res, err = c.PostForm(action.String(), form)
	}
	t.Fatal("no way back to the demo relying party within 5 forms")
	return ""
}
