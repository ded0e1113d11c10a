package outbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
)

// TransferOutcome is the answer to one transfer request. Exactly one of Answer and Err
// is set. A denial by the orchestrator (Code map_quarantined, map_unavailable, ...)
// leaves the character where it stands; so does any other error, which the player sees
// with Code "map_unavailable".
type TransferOutcome struct {
	Answer *mapcontract.TransferAnswer
	Err    error
	// Code is the public error code of Err: the orchestrator's own code, or
	// map_unavailable for failures without one (the orchestrator did not answer).
	Code string
}

// Denied reports whether the transfer was refused (the player stays).
func (o TransferOutcome) Denied() bool { return o.Answer == nil }

// NewTransferID returns a fresh transfer id, chosen by the source map so that retries
// of one request are recognised as the same transfer.
func NewTransferID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "tr-" + hex.EncodeToString(b[:])
}

// RequestTransfer queues a transfer of one character and returns at once; done is
// called from the link's goroutine with the outcome. The request carries the
// character's final state, which the orchestrator saves before it answers; the source
// stops simulating the character (it gives up authority) when the answer grants the
// transfer, and keeps it where it stands when it is denied. A missing TransferID is
// filled in; FromInstanceID defaults to the link's instance. Transient failures are
// retried with the same TransferID for at most TransferLimit.
func (l *Link) RequestTransfer(r mapcontract.TransferRequest, done func(TransferOutcome)) error {
	if r.TransferID == "" {
		r.TransferID = NewTransferID()
	}
	if r.FromInstanceID == "" {
		r.FromInstanceID = l.Ready().InstanceID
	}
	if r.State.Revision == 0 {
		r.State.Revision = l.out.revision(l.Now())
	}
	if done == nil {
		done = func(TransferOutcome) {}
	}
	return enqueue(l, l.out.transfers, transfer{req: r, done: func(a *mapcontract.TransferAnswer, err error) {
		done(outcome(a, err))
	}})
}

func outcome(a *mapcontract.TransferAnswer, err error) TransferOutcome {
	if err == nil {
		return TransferOutcome{Answer: a}
	}
	code := apierr.Code(err)
	if code == apierr.EINTERNAL {
		code = apierr.EMAPUNAVAILABLE
	}
	return TransferOutcome{Err: err, Code: code}
}

// transferLoop is one transfer worker: it sends requests one at a time.
func (l *Link) transferLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case t := <-l.out.transfers:
			a, err := l.sendTransfer(ctx, t.req)
			t.done(a, err)
			l.out.finished()
		}
	}
}

func (l *Link) sendTransfer(ctx context.Context, r mapcontract.TransferRequest) (*mapcontract.TransferAnswer, error) {
	limit := l.TransferLimit
	if limit <= 0 {
		limit = DefaultTransferLimit
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	b := l.backoff()
	for {
		a, err := l.Orch.RequestTransfer(ctx, r)
		if err == nil {
			return a, nil
		}
		if !httpkit.Transient(err) || ctx.Err() != nil {
			l.Log.Info("transfer not granted", "transfer", r.TransferID, "character", r.CharacterID, "err", err)
			if ctx.Err() != nil {
				err = apierr.Errorf(apierr.EMAPUNAVAILABLE, "no answer from the orchestrator within %s: %v", limit, err)
			}
			return nil, fmt.Errorf("request transfer %s: %w", r.TransferID, err)
		}
		l.Log.Warn("transfer request failed; retrying", "transfer", r.TransferID, "err", err, "in", b.delay)
		if !b.wait(ctx) {
			return nil, apierr.Errorf(apierr.EMAPUNAVAILABLE, "no answer from the orchestrator within %s", limit)
		}
	}
}
