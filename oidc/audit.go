package oidc

import (
	"context"

	"github.com/oidcd/oidcd/fsm"
)

// The protocol's audit events (docs/operators/audit.md): a command that does
// the action carries its event (fsm.StampIn: the node and the client's
// address come from the request's audit base). The sign-in's events,
// failures included, are package signin's.

// stamp returns cmd carrying a.
func (p *Provider) stamp(ctx context.Context, cmd fsm.Command, a fsm.Audit) fsm.Command {
	return fsm.StampIn(ctx, cmd, p.now(), a)
}
