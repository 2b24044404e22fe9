package email

import (
	"strings"
	"testing"
)

// TestMailbox: every spelling of one mailbox folds to one address, and
// distinct mailboxes stay apart.
func TestMailbox(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ann@example.com", "ann@example.com"},
		{"Ann@Example.COM", "ann@example.com"},
		{"  ANN@example.com ", "ann@example.com"},
		{"ann+news@example.com", "ann@example.com"},
		{"Ann+A+B@Example.com", "ann@example.com"},
		{"ann+@example.com", "ann@example.com"},
		{"+tag@example.com", "@example.com"},
		{"ann@example.com.", "ann@example.com"},
		{"ann@EXAMPLE.com..", "ann@example.com"},
		{"ann@bücher.example", "ann@xn--bcher-kva.example"},
		{"ann@BÜCHER.example", "ann@xn--bcher-kva.example"},
		{"ann@xn--bcher-kva.example", "ann@xn--bcher-kva.example"},
		{"ann@ｅｘａｍｐｌｅ.com", "ann@example.com"}, // full-width letters, as a resolver reads them
		// Dots: only where the provider ignores them.
		{"a.n.n@example.com", "a.n.n@example.com"},
		{"A.Nn+x@Gmail.com", "ann@gmail.com"},
		{"ann@googlemail.com", "ann@gmail.com"},
		{"a.nn+1@googlemail.com.", "ann@gmail.com"},
		{"ann@mail.gmail.com", "ann@mail.gmail.com"},
		// Other separators are ordinary characters.
		{"first-last@example.com", "first-last@example.com"},
		// The '@' that counts is the last one; something without one is
		// itself.
		{`"a@b"@example.com`, `"a@b"@example.com`},
		{"not an address", "not an address"},
		{"", ""},
	} {
		if got := Mailbox(tc.in); got != tc.want {
			t.Errorf("Mailbox(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestMailboxKey: the key is one per mailbox and holds no address.
func TestMailboxKey(t *testing.T) {
	same := []string{"ann@example.com", "ANN+1@Example.com", "ann+2@example.com."}
	for _, a := range same {
		if MailboxKey(a) != MailboxKey(same[0]) {
			t.Errorf("MailboxKey(%q) differs from MailboxKey(%q)", a, same[0])
		}
	}
	k := MailboxKey("ann@example.com")
	if len(k) != 32 || strings.Contains(k, "ann") || strings.Contains(k, "@") {
		t.Errorf("key %q", k)
	}
	for _, other := range []string{"anne@example.com", "ann@example.org", "a.nn@example.com"} {
		if MailboxKey(other) == k {
			t.Errorf("MailboxKey(%q) is ann@example.com's", other)
		}
	}
}
