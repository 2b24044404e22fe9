package cluster

import (
	"bytes"
	"context"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogWriter forwards hclog's text lines (raft's logger) to slog, keeping
// the level hclog printed.
type hclogWriter struct{ log *slog.Logger }

func (w hclogWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	switch {
	case bytes.Contains(line, []byte("[ERROR]")):
		level = slog.LevelError
	case bytes.Contains(line, []byte("[WARN]")):
		level = slog.LevelWarn
	case bytes.Contains(line, []byte("[DEBUG]")), bytes.Contains(line, []byte("[TRACE]")):
		level = slog.LevelDebug
	}
	w.log.Log(context.Background(), level, string(line))
	return len(p), nil
}

func newHCLog(log *slog.Logger, name string) hclog.Logger {
	level := hclog.Info
	switch {
	case log.Enabled(context.Background(), slog.LevelDebug):
		level = hclog.Debug
	case !log.Enabled(context.Background(), slog.LevelInfo):
		level = hclog.Warn
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:            name,
		Level:           level,
		Output:          hclogWriter{log: log.With("component", name)},
		DisableTime:     true,
		IncludeLocation: false,
	})
}
