package htmlform

import (
	"net/url"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

const page = `<!DOCTYPE html><html><body>
<form method="get" action="/search"><input name="q" value="x"><button name="method" value="password">decoy</button></form>
<form method="post" action="/authorize">
<input type="hidden" name="csrf_token" value="c1">
<input type="hidden" name="step" value="s1">
<input type="email" name="email" value="ann@example.com">
<input type="checkbox" name="remember" value="on">
<input type="submit" name="go" value="1">
<button type="submit" name="method" value="password">Sign in</button>
</form>
<form method="POST" action="/other"><button name="decision" value="allow">Allow</button></form>
<form method="post" action="/code"><input name="code" value=""><button type="submit">Sign in</button></form>
</body></html>`

func TestFindIn(t *testing.T) {
	cases := []struct {
		name, value string
		action      string
		values      url.Values
		wantErr     bool
	}{
		{"method", "password", "/authorize", url.Values{"csrf_token": {"c1"}, "step": {"s1"}, "email": {"ann@example.com"}}, false},
		{"go", "1", "/authorize", url.Values{"csrf_token": {"c1"}, "step": {"s1"}, "email": {"ann@example.com"}}, false},
		{"decision", "allow", "/other", url.Values{}, false},
		{"method", "sms", "", nil, true},
		{"", "", "/code", url.Values{"code": {""}}, false}, // a page's one plain submit button
		{"q", "x", "", nil, true},                          // an input that is not a submit button, in a get form
	}
	for _, tc := range cases {
		action, values, err := FindIn(strings.NewReader(page), tc.name, tc.value)
		if (err != nil) != tc.wantErr {
			t.Fatalf("%s=%s: err %v", tc.name, tc.value, err)
		}
		if err == nil && (action != tc.action || values.Encode() != tc.values.Encode()) {
			t.Fatalf("%s=%s: %q %v, want %q %v", tc.name, tc.value, action, values, tc.action, tc.values)
		}
	}
}

// TestForms: every form with its action, method, hidden values, other
// inputs and named buttons, in document order.
func TestForms(t *testing.T) {
	doc, err := html.Parse(strings.NewReader(`<form action="/a" method="post"><input type="hidden" name="csrf" value="c1">
<input name="email"><button name="method" value="password">Go</button><button>plain</button></form>
<form action="/b" method="get"><input type="hidden" name="step" value="s"><input type="hidden" name="step" value="t"></form>`))
	if err != nil {
		t.Fatal(err)
	}
	got := Forms(doc)
	want := []Form{
		{Action: "/a", Method: "post", Hidden: url.Values{"csrf": {"c1"}}, Inputs: []string{"email"}, Buttons: [][2]string{{"method", "password"}}},
		{Action: "/b", Method: "get", Hidden: url.Values{"step": {"s", "t"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}
