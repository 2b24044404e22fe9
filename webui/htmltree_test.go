package webui

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

// node is a parsed element or text node.
//
// The tree comes from encoding/xml in its HTML mode (not strict, HTML void
// elements auto-closed, HTML entities known). golang.org/x/net/html would
// be the natural parser but is not a dependency of this module; the
// stand-in is stricter than an HTML5 parser (elements must nest properly),
// which the templates satisfy and which the tests thereby also check.
type node struct {
	tag      string // "" for a text node
	attr     map[string]string
	order    []string // attribute names in document order
	text     string   // text nodes only
	parent   *node
	children []*node
}

type document struct {
	doctype string
	root    *node // synthetic root holding the top-level nodes
}

func parseHTML(t *testing.T, body string) document {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(body))
	d.Strict = false
	d.AutoClose = xml.HTMLAutoClose
	d.Entity = xml.HTMLEntity
	doc := document{root: &node{tag: "#root", attr: map[string]string{}}}
	cur := doc.root
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("parse HTML: %v\n%s", err, body)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &node{tag: tok.Name.Local, attr: map[string]string{}, parent: cur}
			for _, a := range tok.Attr {
				name := a.Name.Local
				if a.Name.Space != "" {
					name = a.Name.Space + ":" + name
				}
				if _, dup := n.attr[name]; dup {
					t.Errorf("<%s> has attribute %q twice", n.tag, name)
				}
				n.attr[name] = a.Value
				n.order = append(n.order, name)
			}
			cur.children = append(cur.children, n)
			cur = n
		case xml.EndElement:
			if tok.Name.Local != cur.tag {
				t.Fatalf("parse HTML: </%s> closes <%s>", tok.Name.Local, cur.tag)
			}
			cur = cur.parent
		case xml.CharData:
			cur.children = append(cur.children, &node{text: string(tok), parent: cur})
		case xml.Directive:
			if doc.doctype == "" {
				doc.doctype = string(tok)
			}
		case xml.Comment:
			t.Errorf("unexpected HTML comment %q", tok)
		}
	}
	if cur != doc.root {
		t.Fatalf("parse HTML: <%s> not closed", cur.tag)
	}
	return doc
}

// find returns the element descendants of n, in document order, for which
// match is true.
func (n *node) find(match func(*node) bool) []*node {
	var out []*node
	var walk func(*node)
	walk = func(n *node) {
		for _, c := range n.children {
			if c.tag == "" {
				continue
			}
			if match(c) {
				out = append(out, c)
			}
			walk(c)
		}
	}
	walk(n)
	return out
}

func (n *node) all(tag string) []*node {
	return n.find(func(c *node) bool { return c.tag == tag })
}

func (n *node) has(attr string) bool { _, ok := n.attr[attr]; return ok }

// textContent is the text of n and its descendants, with runs of white
// space collapsed.
func (n *node) textContent() string {
	var b strings.Builder
	var walk func(*node)
	walk = func(n *node) {
		if n.tag == "" {
			b.WriteString(n.text)
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}
