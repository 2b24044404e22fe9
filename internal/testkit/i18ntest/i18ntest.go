// Package i18ntest holds the checks that a template's texts come from a
// catalog, shared by the tests of webui (the pages) and email (the
// mail): which texts a template holds outside its actions, and which
// catalog keys its calls name.
package i18ntest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/template/parse"
	"unicode"

	"golang.org/x/net/html"
)

var actionRE = regexp.MustCompile(`(?s){{.*?}}`)

// HasLetters reports whether s holds more than whitespace, punctuation
// and symbols.
func HasLetters(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return !unicode.IsSpace(r) && !unicode.IsPunct(r) && !unicode.IsSymbol(r) }) >= 0
}

// StrayHTML returns the texts of an HTML template, its actions taken out,
// that are more than whitespace, punctuation and symbols: its text nodes
// and the values of the attributes attrs (those people see or hear, such
// as alt or aria-label).
func StrayHTML(src string, attrs []string) []string {
	z := html.NewTokenizer(strings.NewReader(actionRE.ReplaceAllString(src, "")))
	var stray []string
	for {
		switch z.Next() {
		case html.ErrorToken:
			return stray
		case html.TextToken:
			if s := string(z.Text()); HasLetters(s) {
				stray = append(stray, strings.TrimSpace(s))
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			for _, a := range z.Token().Attr {
				if slices.Contains(attrs, a.Key) && HasLetters(a.Val) {
					stray = append(stray, strings.TrimSpace(a.Val))
				}
			}
		}
	}
}

// StrayText returns the lines of a plain-text template, its actions
// taken out, that are more than whitespace, punctuation and symbols.
func StrayText(src string) []string {
	var stray []string
	for _, line := range strings.Split(actionRE.ReplaceAllString(src, ""), "\n") {
		if HasLetters(line) {
			stray = append(stray, strings.TrimSpace(line))
		}
	}
	return stray
}

// builtins are text/template's functions, for parsing alone.
var builtins = []string{"and", "or", "not", "len", "index", "slice", "print", "printf", "println", "html", "js", "urlquery", "call", "eq", "ne", "lt", "le", "gt", "ge"}

// Keys lists the catalog keys a template names: the first argument of
// each call of one of keyFuncs, which must be a string constant (an
// error names any that is not). funcs are the names of the template's
// other functions, for parsing.
func Keys(name, src string, funcs []string, keyFuncs ...string) ([]string, error) {
	known := map[string]any{}
	for _, f := range slices.Concat(funcs, keyFuncs, builtins) {
		known[f] = true
	}
	trees, err := parse.Parse(name, src, "{{", "}}", known)
	if err != nil {
		return nil, err
	}
	var keys []string
	var errs []string
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n != nil {
				for _, c := range n.Nodes {
					walk(c)
				}
			}
		case *parse.ActionNode:
			walk(n.Pipe)
		case *parse.PipeNode:
			if n != nil {
				for _, c := range n.Cmds {
					walk(c)
				}
			}
		case *parse.CommandNode:
			if id, ok := n.Args[0].(*parse.IdentifierNode); ok && slices.Contains(keyFuncs, id.Ident) {
				if s, ok := argString(n, 1); ok {
					keys = append(keys, s)
				} else {
					errs = append(errs, fmt.Sprintf("%s with a key that is not a constant: %s", id.Ident, n))
				}
			}
			for _, a := range n.Args {
				walk(a)
			}
		case *parse.IfNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.TemplateNode:
			walk(n.Pipe)
		}
	}
	for _, tree := range trees {
		walk(tree.Root)
	}
	if len(errs) > 0 {
		return keys, fmt.Errorf("%s: %s", name, strings.Join(errs, "; "))
	}
	return keys, nil
}

func argString(n *parse.CommandNode, i int) (string, bool) {
	if len(n.Args) <= i {
		return "", false
	}
	s, ok := n.Args[i].(*parse.StringNode)
	if !ok {
		return "", false
	}
	return s.Text, true
}
