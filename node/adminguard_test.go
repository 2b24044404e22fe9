package node_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/testcluster"
)

// TestConsoleTokenFormSharesTheAdminGuard: a node counts admin token
// guesses once per client address, whether they come to the admin API or
// to the console's token form. 19 wrong tokens on the API and one on the
// form use up the address's allowance; the 21st attempt is refused with
// 429 before its token is compared, on the form (its page, Retry-After)
// and on the API (the envelope): the right token gets 429 on both.
func TestConsoleTokenFormSharesTheAdminGuard(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 1})
	api := func(token string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", c.URL(0)+"/admin/v1/status", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if got := api(testcluster.AdminToken).StatusCode; got != http.StatusOK {
		t.Fatalf("the right token on the API: got %d, want 200", got)
	}
	for i := range 19 {
		if got := api("wrong").StatusCode; got != http.StatusUnauthorized {
			t.Fatalf("wrong token %d on the API: got %d, want 401", i+1, got)
		}
	}
	b := testcluster.NewBrowser(t)
	form := b.Get(c.URL(0) + "/console/signin")
	if form.Status != http.StatusOK {
		t.Fatalf("sign-in page: got %d, want 200", form.Status)
	}
	if p := b.Submit(form, map[string]string{"token": "wrong"}, "", ""); p.Status != http.StatusUnauthorized {
		t.Fatalf("20th attempt, a wrong token on the form: got %d, want 401", p.Status)
	}
	p := b.Submit(form, map[string]string{"token": testcluster.AdminToken}, "", "")
	if p.Status != http.StatusTooManyRequests || p.Header.Get("Retry-After") == "" || !strings.Contains(p.Body, `name="token"`) {
		t.Fatalf("21st attempt, the right token on the form: got %d (Retry-After %q), want 429 with the form again\n%s",
			p.Status, p.Header.Get("Retry-After"), p.Body)
	}
	if resp := api(testcluster.AdminToken); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the right token on the API: got %d (Retry-After %q), want 429", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
