package cli

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBrandingCommands(t *testing.T) {
	dir := t.TempDir()
	png := []byte("\x89PNG\r\n\x1a\nrest of a png")
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pngFile, svgFile, txtFile := write("logo.png", png), write("logo.svg", svg), write("logo.txt", []byte("hello"))
	bigFile := write("big.svg", make([]byte, 64<<10+1))
	uri := func(typ string, b []byte) string {
		return "data:" + typ + ";base64," + base64.StdEncoding.EncodeToString(b)
	}

	for _, tc := range []struct {
		args         []string
		method, path string
		body         map[string]any
	}{
		{[]string{"branding", "get"}, "GET", "/admin/v1/branding", nil},
		{[]string{"branding", "set", "--display-name", "Example", "--logo", pngFile, "--primary-color", "#005a9c"}, "PUT", "/admin/v1/branding",
			map[string]any{"display_name": "Example", "logo": uri("image/png", png), "primary_color": "#005a9c"}},
		{[]string{"branding", "set", "--logo", svgFile, "--support-url", "https://help.example.com/", "--support-email", "help@example.com"}, "PUT", "/admin/v1/branding",
			map[string]any{"logo": uri("image/svg+xml", svg), "support_url": "https://help.example.com/", "support_email": "help@example.com"}},
		{[]string{"branding", "set", "--logo=", "--display-name="}, "PUT", "/admin/v1/branding", map[string]any{"logo": "", "display_name": ""}},
		{[]string{"org", "update", "o1", "--branding-display-name", "Acme", "--branding-logo", pngFile}, "PATCH", "/admin/v1/organizations/o1",
			map[string]any{"branding": map[string]any{"display_name": "Acme", "logo": uri("image/png", png)}}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			f := newFakeAPI(t)
			f.answer(200, `{"display_name":"Example","logo":"`+uri("image/png", png)+`","primary_color":"#005a9c","support_url":"","support_email":""}`)
			r := run(t, f.env(), "", tc.args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			req := f.only(t)
			if req.Method != tc.method || req.Path != tc.path {
				t.Fatalf("%s %s, want %s %s", req.Method, req.Path, tc.method, tc.path)
			}
			if tc.body != nil {
				var got map[string]any
				json.Unmarshal([]byte(req.Body), &got)
				gb, _ := json.Marshal(got)
				wb, _ := json.Marshal(tc.body)
				if string(gb) != string(wb) {
					t.Errorf("body %s, want %s", gb, wb)
				}
			}
			if tc.args[0] == "branding" && (!strings.Contains(r.stdout, "image/png, 21 bytes, /branding/logo/") || strings.Contains(r.stdout, "base64")) {
				t.Errorf("stdout %q: want the logo summarized", r.stdout)
			}
		})
	}

	f := newFakeAPI(t)
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"branding", "set"}, "nothing to set"},
		{[]string{"branding", "set", "--logo", txtFile}, "neither a PNG image nor an .svg file"},
		{[]string{"branding", "set", "--logo", bigFile}, "larger than 64 KiB"},
		{[]string{"branding", "set", "--logo", filepath.Join(dir, "missing.png")}, "--logo"},
		{[]string{"org", "update", "o1", "--branding-logo", txtFile}, "--branding-logo"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := run(t, f.env(), "", tc.args...)
			if r.code != ExitUsage || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, ExitUsage, tc.stderr)
			}
		})
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("usage errors sent %d requests", n)
	}
}
