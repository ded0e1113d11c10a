package envconf

import (
	"io"
	"log/slog"
)

// NewLogger returns the structured JSON logger every mapyard binary writes, at level
// ("debug", "info", "warn" or "error", as validated with the rest of the configuration;
// anything else logs at info).
func NewLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}
