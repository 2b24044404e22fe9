package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// brandingFlags are the fields of a branding, as branding set takes them
// and org update with the prefix "branding-".
type brandingFlags struct {
	prefix                                                    string
	displayName, logo, primaryColor, supportURL, supportEmail string
}

func (b *brandingFlags) register(fs *flag.FlagSet, prefix string) {
	b.prefix = prefix
	fs.StringVar(&b.displayName, prefix+"display-name", "", "the `name` the sign-in pages show (= clears it)")
	fs.StringVar(&b.logo, prefix+"logo", "", "a PNG or SVG `file` of at most 64 KiB (= clears the logo)")
	fs.StringVar(&b.primaryColor, prefix+"primary-color", "", "the `#rrggbb` of buttons; white text on it must reach 4.5:1")
	fs.StringVar(&b.supportURL, prefix+"support-url", "", "an https `URL` where people get help")
	fs.StringVar(&b.supportEmail, prefix+"support-email", "", "a support `address`")
}

// body returns the fields whose flags were given; the logo file is read
// and sent as a data: URI.
func (b *brandingFlags) body(in *inv) (map[string]any, error) {
	out := map[string]any{}
	for flagName, v := range map[string]struct {
		field, val string
	}{
		"display-name": {"display_name", b.displayName}, "primary-color": {"primary_color", b.primaryColor},
		"support-url": {"support_url", b.supportURL}, "support-email": {"support_email", b.supportEmail},
	} {
		if in.given(b.prefix + flagName) {
			out[v.field] = v.val
		}
	}
	if in.given(b.prefix + "logo") {
		if b.logo == "" {
			out["logo"] = ""
		} else {
			uri, err := logoDataURI(b.logo)
			if err != nil {
				return nil, errUsage("--%slogo: %v", b.prefix, err)
			}
			out["logo"] = uri
		}
	}
	return out, nil
}

// logoDataURI reads a PNG (by its signature) or SVG (by its .svg name)
// file as a data: URI; the server checks the rest.
func logoDataURI(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 64<<10+1))
	if err != nil {
		return "", err
	}
	if len(data) > 64<<10 {
		return "", fmt.Errorf("%s is larger than 64 KiB", path)
	}
	typ := ""
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		typ = "image/png"
	case strings.EqualFold(filepath.Ext(path), ".svg"):
		typ = "image/svg+xml"
	default:
		return "", fmt.Errorf("%s is neither a PNG image nor an .svg file", path)
	}
	return "data:" + typ + ";base64," + base64.StdEncoding.EncodeToString(data), nil
}

func brandingGet(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(in *inv) (*request, error) {
		return &request{method: http.MethodGet, path: "/branding", show: showBranding}, nil
	}
}

func brandingSet(fs *flag.FlagSet) func(in *inv) (*request, error) {
	var b brandingFlags
	b.register(fs, "")
	return func(in *inv) (*request, error) {
		body, err := b.body(in)
		if err != nil {
			return nil, err
		}
		if len(body) == 0 {
			return nil, errUsage("nothing to set: give at least one of --display-name, --logo, --primary-color, --support-url, --support-email")
		}
		return &request{method: http.MethodPut, path: "/branding", body: body, show: showBranding}, nil
	}
}

// showBranding prints a branding as "field value" lines, the logo as its
// type, size and SHA-256 (the name it is served under) rather than the
// whole data: URI.
func showBranding(w io.Writer, body []byte) error {
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		return err
	}
	if logo, _ := obj["logo"].(string); logo != "" {
		obj["logo"] = logoSummary(logo)
	}
	return writeFields(w, obj, []string{"display_name", "logo", "primary_color", "support_url", "support_email"})
}

func logoSummary(uri string) string {
	meta, payload, _ := strings.Cut(strings.TrimPrefix(uri, "data:"), ",")
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return uri
	}
	sum := sha256.Sum256(data)
	return fmt.Sprintf("%s, %d bytes, /branding/logo/%s", strings.TrimSuffix(meta, ";base64"), len(data), hex.EncodeToString(sum[:]))
}
