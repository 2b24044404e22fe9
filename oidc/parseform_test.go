package oidc

import (
	"net/url"
	"reflect"
	"testing"
)

// TestParseFormIsParseQuery: the shortcut answers what url.ParseQuery
// answers, for bodies it takes and bodies it hands on.
func TestParseFormIsParseQuery(t *testing.T) {
	for _, body := range []string{
		"",
		"token=eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln",
		"token=abc&token_type_hint=access_token",
		"token=a&token=b",
		"&&token=a&",
		"token",
		"token=",
		"=a",
		"a=b=c",
		"token=a%20b",
		"token=a+b",
		"token=a;b",
		"token=%zz",
		"k;=v",
		"grant_type=authorization_code&code=abc-_.~&redirect_uri=https%3A%2F%2Fapp%2Fcb&code_verifier=xyz",
	} {
		want, wantErr := url.ParseQuery(body)
		got, gotErr := parseForm(body)
		if (wantErr == nil) != (gotErr == nil) || !reflect.DeepEqual(map[string][]string(got), map[string][]string(want)) {
			t.Errorf("parseForm(%q) = %v, %v; url.ParseQuery = %v, %v", body, got, gotErr, want, wantErr)
		}
	}
}

func FuzzParseForm(f *testing.F) {
	f.Add("token=abc&token_type_hint=access_token")
	f.Add("a=b=c&&d")
	f.Fuzz(func(t *testing.T, body string) {
		want, wantErr := url.ParseQuery(body)
		got, gotErr := parseForm(body)
		if (wantErr == nil) != (gotErr == nil) || !reflect.DeepEqual(map[string][]string(got), map[string][]string(want)) {
			t.Fatalf("parseForm(%q) = %v, %v; url.ParseQuery = %v, %v", body, got, gotErr, want, wantErr)
		}
	})
}
