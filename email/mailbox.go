package email

import (
	"strings"

	"github.com/oidcd/oidcd/internal/password"
)

// Mailbox folds addr to the mailbox it most likely reaches, for counting
// the messages that go to it (the limits of docs/operators/self-service.md
// and invitations.md); never to send to, nor to tell accounts apart. The
// fold is one function of addr in lower case, so every spelling of an
// address an account matches case-insensitively counts as that address:
//
//   - the whole address in lower case, surrounding space trimmed;
//   - the domain (after the last '@') without trailing dots, in its IDNA
//     ASCII form when it has one (ASCIIDomain), so "bücher.example" and
//     "xn--bcher-kva.example" are one;
//   - the local part cut at its first '+': plus-addressing (RFC 5233
//     subaddresses) reaches one mailbox at nearly every provider, so
//     "ann+1@" and "ann+2@" are "ann@" (a local part that starts with '+'
//     folds to nothing before the '@': those share one count, which only
//     ever sends less);
//   - at gmail.com and googlemail.com, which are one provider that ignores
//     dots in the local part, the dots dropped and the domain gmail.com.
//
// Dots are dropped nowhere else: at most providers "j.smith" and "jsmith"
// are two people, and folding them would let mail to one use up the
// other's allowance. Other subaddress separators ('-' at some providers
// and relays) are not folded for the same reason: "first-last@" is an
// ordinary address.
func Mailbox(addr string) string {
	a := strings.ToLower(strings.TrimSpace(addr))
	at := strings.LastIndexByte(a, '@')
	if at < 0 {
		return a
	}
	local, domain := a[:at], strings.TrimRight(a[at+1:], ".")
	if ascii, ok := ASCIIDomain(domain); ok {
		domain = ascii
	}
	if i := strings.IndexByte(local, '+'); i >= 0 {
		local = local[:i]
	}
	if domain == "gmail.com" || domain == "googlemail.com" {
		local, domain = strings.ReplaceAll(local, ".", ""), "gmail.com"
	}
	return local + "@" + domain
}

// MailboxKey is the throttle subject of the mailbox addr reaches: a hash
// of Mailbox(addr), so a counter holds no address and an address nobody
// has counts as one that is known.
func MailboxKey(addr string) string { return password.HashSecret(Mailbox(addr))[:32] }
