package webui

import (
	"html"
	"html/template"
	"net/url"
	"strings"
)

// The brand's parts of a page are written here rather than in
// layout.html: a branded page executed a dozen template actions more
// (each a reflective field lookup or call), which made the sign-in page
// about 15 % slower to render than a plain one. The texts still come
// from the catalog (page.logo, page.support, page.support_link).

// brandStyle links the brand's stylesheet after the page's own; "" for
// none.
func brandStyle(b Brand) template.HTML {
	style := sameOrigin(b.StyleURL)
	if style == "" {
		return ""
	}
	return template.HTML("\n<link rel=\"stylesheet\" href=\"" + html.EscapeString(style) + "\">") // #nosec G203 -- escaped here
}

// brandHead is the page's header: the logo (decorative beside the name,
// else named by page.logo) and the name; "" for a brand with neither.
func (u *UI) brandHead(i int, b Brand) template.HTML {
	logo, name := sameOrigin(b.LogoURL), b.DisplayName
	if logo == "" && name == "" {
		return ""
	}
	var s strings.Builder
	s.WriteString("\n<header class=\"brand\">")
	if logo != "" {
		alt := ""
		if name == "" {
			alt = u.text(i, "page.logo")
		}
		s.WriteString(`<img class="logo" src="` + html.EscapeString(logo) + `" alt="` + html.EscapeString(alt) + `">`)
	}
	if name != "" {
		s.WriteString(`<span class="site">` + html.EscapeString(name) + `</span>`)
	}
	s.WriteString("</header>")
	return template.HTML(s.String()) // #nosec G203 -- every part is escaped here
}

// brandFoot is the page's footer: the support link and address; "" for
// a brand with neither.
func (u *UI) brandFoot(i int, b Brand) template.HTML {
	link, addr := webURL(b.SupportURL), mailAddress(b.SupportEmail)
	if link == "" && addr == "" {
		return ""
	}
	var s strings.Builder
	s.WriteString("\n<footer class=\"support\">\n<p>" + html.EscapeString(u.text(i, "page.support")))
	if link != "" {
		s.WriteString(` <a href="` + html.EscapeString(link) + `">` + html.EscapeString(u.text(i, "page.support_link")) + `</a>`)
	}
	if link != "" && addr != "" {
		s.WriteString(" ·")
	}
	if addr != "" {
		s.WriteString(` <a href="mailto:` + html.EscapeString(addr) + `">` + html.EscapeString(addr) + `</a>`)
	}
	s.WriteString("</p>\n</footer>")
	return template.HTML(s.String()) // #nosec G203 -- every part is escaped here
}

// sameOrigin is a path on the provider's own origin ("/..." but not
// "//host"), else "".
func sameOrigin(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") {
		return ""
	}
	return p
}

// webURL is an http or https URL with a host, else "" (no javascript:,
// data: or relative link).
func webURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return ""
	}
	return u.String()
}

// mailAddress is an address fit for a mailto: link (one @, no spaces,
// quotes, angle brackets or URL delimiters), else "".
func mailAddress(s string) string {
	if strings.Count(s, "@") != 1 || strings.ContainsAny(s, " \t\r\n\"'<>()[]\\,;:?#&%/") || len(s) > 254 {
		return ""
	}
	return s
}
