package app

import (
	"context"
	"log/slog"
	"sync/atomic"
)

// Identity is who a map server's log lines say it is: its instance and map, or its
// pool id while it waits blank in the warm pool. A handed-out pool container cannot
// change its environment, so its logs take the instance from here once
// /control/start-instance names it, and a log shipper reading the lines never sees a
// pool id on a map's work.
type Identity struct {
	attrs atomic.Pointer[[]slog.Attr]
}

// NewIdentity returns the identity of a server started as instanceID of mapID, or, when
// poolID is set, as a blank warm-pool server.
func NewIdentity(instanceID, mapID, poolID string) *Identity {
	id := &Identity{}
	if poolID != "" {
		id.store(slog.String("pool", poolID))
	} else {
		id.Set(instanceID, mapID)
	}
	return id
}

// Set makes every later log line name instanceID and mapID.
func (id *Identity) Set(instanceID, mapID string) {
	id.store(slog.String("instance", instanceID), slog.String("map", mapID))
}

func (id *Identity) store(attrs ...slog.Attr) { id.attrs.Store(&attrs) }

// Handler wraps h so that every record carries the identity current when it is logged.
func (id *Identity) Handler(h slog.Handler) slog.Handler { return identityHandler{h, id} }

// identityHandler adds the current identity to each record it hands to next.
type identityHandler struct {
	next slog.Handler
	id   *Identity
}

var _ slog.Handler = identityHandler{}

func (h identityHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h identityHandler) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(*h.id.attrs.Load()...)
	return h.next.Handle(ctx, r)
}

func (h identityHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return identityHandler{h.next.WithAttrs(attrs), h.id}
}

func (h identityHandler) WithGroup(name string) slog.Handler {
	return identityHandler{h.next.WithGroup(name), h.id}
}
