package httpx

import (
	"net/url"
	"testing"
)

func TestAppendQuery(t *testing.T) {
	st := url.Values{"state": {"a b"}}
	for _, tt := range []struct{ base, want string }{
		{"https://a.example/cb", "https://a.example/cb?state=a+b"},
		{"https://a.example/cb?x=1", "https://a.example/cb?x=1&state=a+b"},
		{"https://a.example/cb?", "https://a.example/cb?state=a+b"},
		{"https://a.example/cb?x=%2F&", "https://a.example/cb?x=%2F&state=a+b"},
		{"https://a.example/cb?x=%2F&y", "https://a.example/cb?x=%2F&y&state=a+b"},
		{"https://a.example/cb#f", "https://a.example/cb?state=a+b#f"},
		{"https://a.example/cb?x=%zz", "https://a.example/cb?x=%zz&state=a+b"},
		{"com.example.app:/cb", "com.example.app:/cb?state=a+b"},
	} {
		if got := AppendQuery(tt.base, st); got != tt.want {
			t.Errorf("AppendQuery(%q): got %q, want %q", tt.base, got, tt.want)
		}
	}
}

func TestAppendQueryEncodesValues(t *testing.T) {
	got := AppendQuery("https://app.example/cb", url.Values{"code": {"c/d+e"}, "state": {"s t&u=v"}})
	if want := "https://app.example/cb?code=c%2Fd%2Be&state=s+t%26u%3Dv"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
