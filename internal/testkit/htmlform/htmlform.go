package htmlform

import (
	"fmt"
	"io"
	"net/url"
	"strings"

	"golang.org/x/net/html"
)

// Find returns the action and input values of the post form in doc that
// holds the submit button name=value; ok is false when there is none.
func Find(doc *html.Node, name, value string) (action string, values url.Values, ok bool) {
	form := first(doc, func(n *html.Node) bool {
		return isElement(n, "form") && strings.EqualFold(Attr(n, "method"), "post") &&
			first(n, func(b *html.Node) bool { return isSubmit(b) && Attr(b, "name") == name && Attr(b, "value") == value }) != nil
	})
	if form == nil {
		return "", nil, false
	}
	values = url.Values{}
	each(form, func(n *html.Node) {
		if !isElement(n, "input") {
			return
		}
		switch strings.ToLower(Attr(n, "type")) {
		case "submit", "button", "checkbox", "radio", "image", "reset":
		default:
			if nm := Attr(n, "name"); nm != "" {
				values.Set(nm, Attr(n, "value"))
			}
		}
	})
	return Attr(form, "action"), values, true
}

// FindIn parses an HTML page and runs Find on it.
func FindIn(page io.Reader, name, value string) (string, url.Values, error) {
	doc, err := html.Parse(page)
	if err != nil {
		return "", nil, err
	}
	action, values, ok := Find(doc, name, value)
	if !ok {
		return "", nil, fmt.Errorf("no post form with button %s=%s", name, value)
	}
	return action, values, nil
}

// Attr is the value of attribute key of n ("" when absent).
func Attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func isElement(n *html.Node, tag string) bool { return n.Type == html.ElementNode && n.Data == tag }

func isSubmit(n *html.Node) bool {
	return isElement(n, "button") || isElement(n, "input") && strings.EqualFold(Attr(n, "type"), "submit")
}

// first is the first node of n's subtree (n included, document order) for
// which match is true.
func first(n *html.Node, match func(*html.Node) bool) *html.Node {
	if match(n) {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if m := first(c, match); m != nil {
			return m
		}
	}
	return nil
}

// each calls visit on every node of n's subtree.
func each(n *html.Node, visit func(*html.Node)) {
	visit(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		each(c, visit)
	}
}

// Form is one <form> of a page as a test reads it: its action and method,
// its hidden inputs with their values, the names of its other inputs, and
// its named buttons as name, value pairs.
type Form struct {
	Action, Method string
	Hidden         url.Values
	Inputs         []string
	Buttons        [][2]string
}

// Forms returns every form of doc in document order.
func Forms(doc *html.Node) []Form {
	var out []Form
	each(doc, func(n *html.Node) {
		if !isElement(n, "form") {
			return
		}
		f := Form{Action: Attr(n, "action"), Method: Attr(n, "method"), Hidden: url.Values{}}
		each(n, func(c *html.Node) {
			switch {
			case isElement(c, "input") && Attr(c, "type") == "hidden":
				f.Hidden.Add(Attr(c, "name"), Attr(c, "value"))
			case isElement(c, "input"):
				f.Inputs = append(f.Inputs, Attr(c, "name"))
			case isElement(c, "button") && Attr(c, "name") != "":
				f.Buttons = append(f.Buttons, [2]string{Attr(c, "name"), Attr(c, "value")})
			}
		})
		out = append(out, f)
	})
	return out
}
