package signin

import (
	"context"

	"github.com/oidcd/oidcd/fsm"
)

// The protocol's audit events (docs/operators/audit.md). A command that does
// the action carries its event (fsm.StampIn: the node and the client's
// address come from the request's audit base); a failure that commits
// nothing else, a wrong password or code whose attempt the throttle
// reservation already counted, commits an event of its own
// (recordFailure). Those are bounded by the same throttles: only an
// attempt that got a reservation is checked, so a flood records at most
// each rule's limit per window (a locked key records its lockout once and
// nothing for the attempts it refuses).

// stamp returns cmd carrying a.
func (p *Signin) stamp(ctx context.Context, cmd fsm.Command, a fsm.Audit) fsm.Command {
	return fsm.StampIn(ctx, cmd, p.now(), a)
}

// signinEvent is a sign-in event of the person subject ("" when unknown)
// for clientID ("" outside an authorization request), naming the client's
// organization where it is known (clientOrg).
func (p *Signin) signinEvent(subject, clientID string, detail map[string]string) fsm.Audit {
	return fsm.Audit{Type: fsm.EventSignin, Actor: fsm.ActorPerson, Subject: subject, ClientID: clientID,
		OrgID: p.clientOrg(clientID), Detail: detail}
}

// clientOrg is the organization of the client clientID when the client
// belongs to one alone; "" for none, for a multi-organization client
// (whose organization is chosen after the sign-in, at the picker) and for
// a client that cannot be read (the event is still recorded).
func (p *Signin) clientOrg(clientID string) string {
	if clientID == "" {
		return ""
	}
	c, err := p.cfg.State.Client(clientID)
	if err != nil || c.MultiOrganization {
		return ""
	}
	return c.OrganizationID
}

// lockoutEvent is the template of the sign-in failure a reservation
// records if it starts a lockout (fsm: deriveReserve).
func (p *Signin) lockoutEvent(subject, clientID string) *fsm.Audit {
	a := p.failureEvent(subject, clientID, nil)
	return &a
}

// failureEvent is the event of a failed sign-in step. It names the
// client's organization only for an unknown address or a member of it:
// anyone can type any address with a wrong password on an
// organization's sign-in page, and the organization's org_admins read
// the events that name it, so naming it in the failure of a person who
// is not theirs would hand them that person's id (SECURITY.md,
// "Administrators who are people"). Such a failure is the site's alone.
func (p *Signin) failureEvent(subject, clientID string, detail map[string]string) fsm.Audit {
	a := p.signinEvent(subject, clientID, detail)
	a.Outcome = fsm.OutcomeFailure
	if subject != "" && a.OrgID != "" {
		if _, err := p.cfg.State.MembershipOf(subject, a.OrgID); err != nil {
			a.OrgID = "" // not a member, or not known to be: the site's
		}
	}
	return a
}

// recordFailure commits a failed sign-in step's event. It is best effort:
// the attempt is already counted, and the person gets the same answer
// whether it is recorded or not.
func (p *Signin) recordFailure(ctx context.Context, subject, clientID, reason string) {
	a := p.failureEvent(subject, clientID, map[string]string{"reason": reason})
	b := fsm.AuditBaseFrom(ctx)
	a.Node, a.IP, a.Time = b.Node, b.IP, p.now().UTC()
	if _, err := p.cfg.Applier.Apply(ctx, fsm.NewAuditEvent(a)); err != nil {
		p.log.Warn("audit: record a failed sign-in", "reason", reason, "error", err)
	}
}
