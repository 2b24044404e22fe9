package main

import (
	"context"
	"log/slog"
)

// A demo (`make run`) is read by a person at a terminal, not by a log
// collector: what matters there is the admin token and the demo sign-in
// that serve prints, not the node's start-up narrative. So --demo, when no
// --log-level is given (flag, OIDCD_LOG_LEVEL or the config file), logs
// warnings and errors only, and of raft only its errors: a single node's
// first election always logs a warning ("heartbeat timeout reached") that
// means nothing on one node. --log-level brings back everything it names.

// demoLogLevel is the level of a demo's log when none is given.
const demoLogLevel = slog.LevelWarn

// quietComponents are the components whose records below Error a demo's
// log drops.
var quietComponents = map[string]bool{"raft": true}

// demoHandler drops the records of quietComponents below Error; the
// component is known from the attributes the logger was made With.
type demoHandler struct {
	slog.Handler
	quiet bool // this logger's component is one of quietComponents
}

func (h demoHandler) Enabled(ctx context.Context, l slog.Level) bool {
	if h.quiet && l < slog.LevelError {
		return false
	}
	return h.Handler.Enabled(ctx, l)
}

func (h demoHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.quiet && r.Level < slog.LevelError {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h demoHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	quiet := h.quiet
	for _, a := range attrs {
		if a.Key == "component" && quietComponents[a.Value.String()] {
			quiet = true
		}
	}
	return demoHandler{Handler: h.Handler.WithAttrs(attrs), quiet: quiet}
}

func (h demoHandler) WithGroup(name string) slog.Handler {
	return demoHandler{Handler: h.Handler.WithGroup(name), quiet: h.quiet}
}
