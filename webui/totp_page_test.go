package webui

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestTOTPSetupLink: the setup page's app link is the otpauth: URI as
// given (html/template would filter it to #ZgotmplZ as a plain string);
// a URI of another scheme or shape gives no link at all; the key is shown
// in groups of four.
func TestTOTPSetupLink(t *testing.T) {
	u := newUI(t)
	const uri = "otpauth://totp/idp.example:ann%40example.com?algorithm=SHA1&digits=6&issuer=idp.example&period=30&secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
	for _, tc := range []struct {
		uri, want string
	}{
		{uri, `<a href="` + strings.ReplaceAll(uri, "&", "&amp;") + `">`},
		{"javascript:alert(1)", ""},
		{"otpauth://hotp/x?secret=A", ""},
		{"https://evil.example/", ""},
		{`otpauth://totp/x"onmouseover="alert(1)`, ""},
		{"", ""},
	} {
		rec := httptest.NewRecorder()
		u.TOTPSetup(rec, 200, TOTPSetupPage{Common: sampleCommon, Secret: "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PX", URI: tc.uri})
		body := rec.Body.String()
		if strings.Contains(body, "ZgotmplZ") {
			t.Errorf("%q: the link is filtered:\n%s", tc.uri, body)
		}
		link := strings.Contains(body, u.Text(sampleCommon.Lang, "totp.open"))
		switch {
		case tc.want == "" && link:
			t.Errorf("%q: a link where none belongs:\n%s", tc.uri, body)
		case tc.want != "" && !strings.Contains(body, tc.want):
			t.Errorf("%q: want %s in:\n%s", tc.uri, tc.want, body)
		}
		if !strings.Contains(body, `<code id="totp-secret">JBSW Y3DP EHPK 3PXP JBSW Y3DP EHPK 3PX</code>`) {
			t.Errorf("%q: the key is not in groups of four:\n%s", tc.uri, body)
		}
	}
}
