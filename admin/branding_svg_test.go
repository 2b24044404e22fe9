package admin

import "testing"

// TestSVGLogoCSSIsAllowListed: a logo's CSS is read against an
// allow-list, so no spelling of what fetches gets through: CSS escapes,
// comments, XML comments and CDATA sections that split a word, character
// references, other at-rules, functions that fetch, url() of anything but
// a fragment, an animated href. What editors write (classes, a gradient,
// a dark-scheme @media, transforms, an editor's own metadata) still
// passes.
func TestSVGLogoCSSIsAllowListed(t *testing.T) {
	const open = `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">`
	for _, tt := range []struct {
		name, body string
		ok         bool
	}{
		// @import, spelled every way.
		{"@import escaped as @\\69mport", `<style>@\69mport "https://evil.example/x.css";</style>`, false},
		{"@import escaped as \\40import", `<style>\40import url(https://evil.example/x.css);</style>`, false},
		{"@import escaped as @imp\\ort", `<style>@imp\ort "https://evil.example/x.css";</style>`, false},
		{"@import split by a CSS comment", `<style>@im/**/port "https://evil.example/x.css";</style>`, false},
		{"@import split by an XML comment", `<style>@im<!-- -->port "https://evil.example/x.css";</style>`, false},
		{"@import split by CDATA", `<style>@imp<![CDATA[ort "https://evil.example/x.css";]]></style>`, false},
		{"@import in CDATA", `<style><![CDATA[@import "https://evil.example/x.css";]]></style>`, false},
		{"@import as a character reference", `<style>&#64;import "https://evil.example/x.css";</style>`, false},
		{"a backslash as a character reference", `<style>&#92;40import "https://evil.example/x.css";</style>`, false},
		{"@import in capitals", `<style>@ImPoRt "https://evil.example/x.css";</style>`, false},
		{"@import in a namespaced style", `<svg xmlns="http://www.w3.org/2000/svg" xmlns:s="http://www.w3.org/2000/svg"><s:style>@import "https://evil.example/x.css";</s:style></svg>`, false},
		{"@font-face", `<style>@font-face{font-family:x;src:local(x)}</style>`, false},
		{"@namespace", `<style>@namespace x url(https://evil.example/);</style>`, false},
		// url() and other functions that fetch.
		{"url() in style", `<style>rect{fill:url(https://evil.example/p)}</style>`, false},
		{"url() in capitals, quoted, spaced", `<style>rect{fill:URL( 'https://evil.example/p')}</style>`, false},
		{"url() escaped as u\\72l(", `<style>rect{fill:u\72l(https://evil.example/p)}</style>`, false},
		{"url() relative", `<style>rect{fill:url(p.svg#a)}</style>`, false},
		{"image-set()", `<style>rect{background:image-set("https://evil.example/p.png" 1x)}</style>`, false},
		{"image()", `<rect mask="image(https://evil.example/m.png)"/>`, false},
		{"src()", `<style>rect{background:src("https://evil.example/p.png")}</style>`, false},
		{"expression()", `<style>rect{width:expression(alert(1))}</style>`, false},
		{"expression() in a style attribute", `<rect style="width:expression(alert(1))"/>`, false},
		{"escaped url() in a style attribute", `<rect style="fill:u\72l(https://evil.example/p)"/>`, false},
		{"url( as a character reference", `<rect style="fill:url&#40;https://evil.example/p)"/>`, false},
		{"url() in a presentation attribute", `<rect fill="url(https://evil.example/p)"/>`, false},
		{"escaped url() in a presentation attribute", `<rect fill="u\rl(https://evil.example/p)"/>`, false},
		{"behavior", `<rect style="behavior:url(x.htc)"/>`, false},
		{"-moz-binding", `<rect style="-moz-binding:url(x.xml#b)"/>`, false},
		{"cursor", `<rect style="cursor:url(x.cur),auto"/>`, false},
		{"@import in a style attribute", `<rect style="@import 'x.css'"/>`, false},
		{"a comment in a style attribute", `<rect style="fill:u/**/rl(x)"/>`, false},
		{"url() animated in", `<rect><animate attributeName="fill" values="url(https://evil.example/p)"/></rect>`, false},
		{"href animated in", `<image><set attributeName="href" to="https://evil.example/x.png"/></image>`, false},
		{"xlink:href animated in", `<image><set attributeName="xlink:href" to="https://evil.example/x.png"/></image>`, false},
		{"an element inside style", `<style><rect/>@import "x.css";</style>`, false},
		// What editors write.
		{"classes with a gradient and a font", `<style>.cls-1{fill:#005a9c;}.cls-2{fill:url(#g);font-family:'Myriad Pro', sans-serif}</style><linearGradient id="g"/><rect class="cls-2"/>`, true},
		{"a quoted fragment url()", `<style>.a{fill:url( "#g" )}</style><rect fill="url( '#g' )"/>`, true},
		{"a dark-scheme @media", `<style>@media (prefers-color-scheme: dark){.a{fill:rgb(255, 255, 255)}}</style>`, true},
		{"selectors' pseudo-classes", `<style>g:not(.b) > rect:nth-child(2n+1){fill:hsl(200 50% 30%)}</style>`, true},
		{"a style attribute", `<rect style="fill:rgba(0,0,0,.5);transform:rotate(45deg) translate(1px, calc(2px + 1%))"/>`, true},
		{"a transform", `<g transform="translate(10,10) scale(2) matrix(1 0 0 1 0 0)"/>`, true},
		{"text with an @ and parentheses", `<text>Acme (Europe) @ home</text><title>f(x)</title>`, true},
		{"an editor's metadata", `<metadata xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="logo(1)@2x.svg"/></metadata>`, true},
		{"an XML comment outside style", `<!-- made by hand (c) --><rect/>`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc := tt.body
			if len(doc) < 4 || doc[:4] != "<svg" {
				doc = open + doc + `</svg>`
			}
			_, typ, err := parseLogo(svgURI(doc))
			if got := err == nil && typ == "image/svg+xml"; got != tt.ok {
				t.Fatalf("accepted %v (%v), want %v:\n%s", got, err, tt.ok, doc)
			}
		})
	}
}
