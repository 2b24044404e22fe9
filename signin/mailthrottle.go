package signin

// The limits on mail a person, or anyone at all, can cause to be sent
// (docs/operators/self-service.md, "Limits"). Every kind counts against
// the same keys: the mailbox it goes to (email.MailboxKey: case, a
// subaddress and gmail's dots folded, and a hash, so a counter holds no
// address and an address nobody has counts as a known one) and the client
// address that asked. They are counted in the replicated throttle, in the
// write that would store the link and commit the message, before
// anything else it does, so every node agrees and requests spread over
// nodes or sent at once cannot pass them. A key that reaches its limit
// stays locked for its window; what is refused is answered as if it was
// sent (the page that would tell is the same), but for the person's own
// limits on /account.
//
// The figures: the issue that brought them in saw 20 verify_email
// messages to one stranger within a minute, from four accounts of one
// mailbox. A person needs one message to reset a password, register or
// prove an address, and a second when the first is slow or lost in a
// spam folder; 3 an hour leaves them a third, and 10 a day stops a
// patient flood at what a person would still call a few messages
// (without it, 3 an hour is 72 a day). 20 an hour from one client address
// (IPv6 by its /64) stops one source spreading messages over many
// mailboxes, each under its own limit, while an office behind one NAT
// still has its mornings of resets. Administrators' messages
// (invitations, address checks) are counted apart, by admin.AdminMailLimit
// under the same fold: a stranger's requests must not block an
// administrator's invitation, nor an administrator's onboarding use up
// the person's own resets.

import (
	"context"
	"errors"
	"time"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/fsm"
)

var (
	// Messages to one mailbox, of every kind: an hour's and a day's.
	// A day's lock lasts its window, so the count is never passed inside
	// it.
	throttleMailbox    = throttlePolicy{"mailbox:", 3, time.Hour, time.Hour}
	throttleMailboxDay = throttlePolicy{"mailbox-day:", 10, 24 * time.Hour, 24 * time.Hour}
	// Messages caused from one client address, of every kind.
	throttleMailIP = throttlePolicy{"mail-ip:", 20, time.Hour, time.Hour}
	// New addresses asked for on /account, per person: 429 and a message,
	// since it tells the person only of their own requests.
	throttleEmailChange = throttlePolicy{"mail-change:", 5, time.Hour, time.Hour}
)

// mailRules are the limits of one message to the address to, asked for
// from the client address ip (remoteIP).
func mailRules(to, ip string) []fsm.ThrottleRule {
	box := email.MailboxKey(to)
	return []fsm.ThrottleRule{throttleMailbox.rule(box), throttleMailboxDay.rule(box), throttleMailIP.rule(ip)}
}

// noticeRules are the limits of the email_changed notice to the old
// address to: its mailbox's alone. The notice's address is the account's,
// not one the request chose, so no source can spread notices over
// mailboxes; its client address is not counted.
func noticeRules(to string) []fsm.ThrottleRule {
	box := email.MailboxKey(to)
	return []fsm.ThrottleRule{throttleMailbox.rule(box), throttleMailboxDay.rule(box)}
}

// errNoticeLimit: the old address's mailbox has had its messages for now,
// and the change that must tell it waits.
var errNoticeLimit = errors.New("signin: the old address has had its messages")

// countNotice counts the email_changed notice to the old address to
// before the write that commits it (fsm.UseLink carries no rules): one
// fsm.ThrottleReserve, refused with errNoticeLimit, nothing counted, when
// the mailbox is locked. A notice is never dropped: it tells the owner of
// the old address that someone took the account's address, so the change
// waits instead, and its link keeps working until it expires. Once
// counted, the count stays, whatever the change's write answers.
func (p *Signin) countNotice(ctx context.Context, to string, now time.Time) error {
	rules := noticeRules(to)
	if !p.localLock(rules, now).IsZero() {
		return errNoticeLimit
	}
	res, err := p.cfg.Applier.Apply(ctx, fsm.MustCommand(fsm.TypeThrottleReserve, fsm.ThrottleReserve{Rules: rules, At: now}))
	if err == nil {
		err = res.Err
	}
	if errors.Is(err, fsm.ErrLocked) {
		return errNoticeLimit
	}
	return err
}
