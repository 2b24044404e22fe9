package signin

// The authenticator app's QR code (issue 45). The setup page links the
// otpauth: URI and shows it as a QR code: an <img> of GET
// /account/totp.png, on the provider's own origin, so the pages' CSP
// stays img-src 'self' (a data: URI would need it loosened). Nothing
// secret is in the image's URL. The setup page sets a cookie sent to
// that path alone that holds the pending secret sealed under the browser
// key (session.Manager.Box) with this browser's SSO session, for as long
// as the setup form lives (accountTTL). The image answers only to that
// session, while it may change its factors (fresh), with no-store. A
// confirmed setup clears the cookie; a cancelled one leaves it to expire
// with its form, and a new setup replaces it.
//
// The QR code is drawn by github.com/boombuler/barcode, the encoder
// github.com/pquerna/otp (our TOTP library) already links: no module is
// added for it.

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/url"

	"github.com/boombuler/barcode/qr"
)

// PathTOTPQR is the QR code of the authenticator app being set up.
const PathTOTPQR = PathAccount + "/totp.png"

const (
	// qrCookie carries the pending secret, sealed, to PathTOTPQR alone.
	qrCookie  = "oidcd_totp_qr"
	qrPurpose = "account-totp-qr"
	// qrQuiet is the light margin around the code, in modules: the
	// four the QR code standard asks for, so a phone finds it on a dark
	// page as on a light one.
	qrQuiet = 4
	// qrDisplay bounds the image's side on the page, in CSS pixels: it
	// fits the card on a 320 px wide phone.
	qrDisplay = 232
)

// qrState is what the QR cookie seals: the secret being set up and the
// SSO session that set it up.
type qrState struct {
	SSOID  string `json:"sso"`
	Secret string `json:"secret"`
}

// totpURI is the otpauth: URI of secret for this person, as the setup
// page links it and its QR code draws it: the issuer's host names the
// site in the app, the person's address the account.
func (a *account) totpURI(secret string) string {
	host := a.p.issuer.Hostname()
	return (&url.URL{Scheme: "otpauth", Host: "totp", Path: "/" + host + ":" + a.user.Email,
		RawQuery: url.Values{"secret": {secret}, "issuer": {host}, "algorithm": {"SHA1"}, "digits": {"6"}, "period": {"30"}}.Encode()}).String()
}

// setQRCookie gives the browser the sealed secret its setup page's image
// draws; false when it has answered (503).
func (a *account) setQRCookie(secret string) bool {
	box, err := a.p.sessions.Box()
	var sealed string
	if err == nil {
		sealed, err = box.Seal(qrPurpose, qrState{SSOID: a.sess.ID, Secret: secret}, a.now.Add(accountTTL))
	}
	if err != nil {
		a.unavailable("seal the QR code's secret: " + err.Error())
		return false
	}
	a.p.sessions.SetCookie(a.w, qrCookie, sealed, PathTOTPQR, a.now.Add(accountTTL))
	return true
}

// clearQRCookie drops the QR cookie once the setup it served is over.
func (a *account) clearQRCookie() { a.p.sessions.ClearCookie(a.w, qrCookie, PathTOTPQR) }

// handleTOTPQR draws the pending secret of this browser's setup page as a
// PNG: 404 unless the QR cookie opens, names this browser's live and
// fresh session, and holds a secret.
func (p *Signin) handleTOTPQR(w http.ResponseWriter, r *http.Request) {
	a := &account{p: p, w: w, r: r, now: p.now()}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	ok, found := a.load()
	if !ok {
		return
	}
	var st qrState
	v := p.sessions.Cookie(r, qrCookie, PathTOTPQR)
	box, err := p.sessions.Box()
	if !found || !a.fresh() || err != nil || v == "" || box.Open(qrPurpose, v, a.now, &st) != nil ||
		st.SSOID != a.sess.ID || st.Secret == "" {
		http.NotFound(w, r)
		return
	}
	img, _, err := qrImage(a.totpURI(st.Secret))
	var buf bytes.Buffer
	if err == nil {
		err = png.Encode(&buf, img)
	}
	if err != nil {
		p.log.Error("account: draw the QR code", "err", err)
		http.Error(w, "the QR code could not be drawn", http.StatusInternalServerError)
		return
	}
	h.Set("Content-Type", "image/png")
	h.Set("Content-Security-Policy", "default-src 'none'")
	h.Set("Content-Length", fmt.Sprint(buf.Len()))
	_, _ = buf.WriteTo(w)
}

// qrImage draws text as a QR code (error correction M, the level
// authenticator apps' own examples use) with its quiet zone, dark on
// light, and returns the side at which the page shows it (qrDisplay at
// most, a whole number of CSS pixels a module). The image has twice
// that many pixels, so a module stays sharp on a high-density screen.
func qrImage(text string) (image.Image, int, error) {
	code, err := qr.Encode(text, qr.M, qr.Auto)
	if err != nil {
		return nil, 0, err
	}
	n := code.Bounds().Dx()
	modules, per := qrScale(n)
	px := 2 * per
	img := image.NewPaletted(image.Rect(0, 0, modules*px, modules*px), color.Palette{color.White, color.Black})
	b := code.Bounds()
	for y := 0; y < n; y++ {
		for x := 0; x < n; x++ {
			if r, _, _, _ := code.At(b.Min.X+x, b.Min.Y+y).RGBA(); r >= 0x8000 {
				continue // light
			}
			x0, y0 := (x+qrQuiet)*px, (y+qrQuiet)*px
			for yy := y0; yy < y0+px; yy++ {
				for xx := x0; xx < x0+px; xx++ {
					img.SetColorIndex(xx, yy, 1)
				}
			}
		}
	}
	return img, modules * per, nil
}

// qrScale is the side of a code of n modules with its quiet zone, in
// modules, and the CSS pixels of a module on the page.
func qrScale(n int) (modules, per int) {
	modules = n + 2*qrQuiet
	return modules, max(qrDisplay/modules, 1)
}

// qrSide is the side at which the page shows the QR code of text (0 when
// it cannot be drawn: the page goes without the image).
func qrSide(text string) int {
	code, err := qr.Encode(text, qr.M, qr.Auto)
	if err != nil {
		return 0
	}
	modules, per := qrScale(code.Bounds().Dx())
	return modules * per
}
