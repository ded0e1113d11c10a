package outbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// InstancePartition is the partition name of the per-instance snapshot (the map's own
// state, as opposed to "character:<id>" partitions).
const InstancePartition = "instance"

// PushDue reports whether the periodic snapshot push is due (every PushEvery) and, if
// so, starts the next period. The tick calls it once per step and pushes every player's
// partition and the instance partition when it says true.
func (l *Link) PushDue() bool {
	now := l.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.opened || now.Sub(l.lastPush) < l.PushEvery {
		return false
	}
	l.lastPush = now
	return true
}

// PushCharacter queues the "character:<id>" partition of one character, held at lease
// epoch, taken at mapTick. It returns the revision it stamped. Pushes coalesce: only the
// newest pending state of a partition is sent.
func (l *Link) PushCharacter(characterID string, epoch, mapTick int64, st record.CharacterStatePayload) (int64, error) {
	if st.InstanceID == "" {
		st.InstanceID = l.Ready().InstanceID
	}
	if st.MapID == "" {
		st.MapID = l.Ready().MapID
	}
	return l.queuePush(record.CharacterPartition(characterID), epoch, mapTick, nil, st)
}

// Push queues one partition's payload (a JSON object the caller does not change
// afterwards). It returns the revision it stamped. Pushes coalesce: only the newest
// pending payload of a partition is sent.
func (l *Link) Push(partition string, mapTick int64, payload json.RawMessage) (int64, error) {
	return l.queuePush(partition, 0, mapTick, payload, nil)
}

// queuePush queues one push of partition. Pending partitions other than characters' are
// bounded by QueueSize (ErrQueueFull past it). A character's partition always has room: pushes
// coalesce, so there is at most one pending push per character the map held since the
// orchestrator last took them, and no new character joins while it does not answer.
// Bounded like the rest, the periodic push of a map holding more characters than
// QueueSize would refuse the checkpoints of the surplus every period.
func (l *Link) queuePush(partition string, epoch, mapTick int64, raw json.RawMessage, value any) (int64, error) {
	now := l.Now()
	p := &push{
		instanceID: l.Ready().InstanceID, partition: partition, epoch: epoch,
		mapTick: mapTick, timeMs: now.UnixMilli(), raw: raw, value: value,
	}
	o := &l.out
	o.mu.Lock()
	if !l.isOpen() {
		o.mu.Unlock()
		return 0, ErrClosed
	}
	if _, ok := o.pending[partition]; !ok {
		if !isCharacter(partition) && len(o.pending) >= o.size && o.pendingOthersLocked() >= o.size {
			o.mu.Unlock()
			return 0, ErrQueueFull
		}
		o.started()
	}
	p.revision = o.nextRevLocked(now)
	o.pending[partition] = p
	o.mu.Unlock()
	select {
	case o.pushKick <- struct{}{}:
	default:
	}
	return p.revision, nil
}

// isOpen reports whether the link takes work: opened and not closed.
func (l *Link) isOpen() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.opened && !l.closed
}

// pushLoop sends pending partitions whenever there are some. A partition whose send
// failed transiently goes back to pending unless a newer one arrived meanwhile, and the
// loop backs off before the next round.
func (l *Link) pushLoop(ctx context.Context) {
	o := &l.out
	b := l.backoff()
	for {
		select {
		case <-ctx.Done():
			return
		case <-o.pushKick:
		}
		o.mu.Lock()
		batch := make([]*push, 0, len(o.pending))
		for k, p := range o.pending {
			batch = append(batch, p)
			delete(o.pending, k)
		}
		o.mu.Unlock()

		failed := false
		for _, p := range batch {
			if failed || !l.sendPush(ctx, p) {
				failed = true
				l.requeue(p)
				continue
			}
			o.finished()
		}
		if !failed {
			b = l.backoff()
			continue
		}
		if !b.wait(ctx) {
			return
		}
		select {
		case o.pushKick <- struct{}{}:
		default:
		}
	}
}

// requeue puts p back unless a newer push of its partition is pending already, in
// which case p is superseded and done.
func (l *Link) requeue(p *push) {
	o := &l.out
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, newer := o.pending[p.partition]; newer {
		o.finishedLocked()
		return
	}
	o.pending[p.partition] = p
}

// sendPush sends one partition; false means it failed transiently and should be sent
// again. A permanent failure is logged and dropped: the orchestrator would refuse the
// same push again (for example a character this map no longer holds).
func (l *Link) sendPush(ctx context.Context, p *push) bool {
	payload := p.raw
	if p.value != nil {
		b, err := json.Marshal(p.value)
		if err != nil {
			l.Log.Error("encode snapshot partition", "partition", p.partition, "err", err)
			return true
		}
		payload = b
	}
	env := record.NewSnapshotEnvelope(l.SimCoreVersion, p.mapTick, p.timeMs, payload)
	_, err := l.Orch.PersistSnapshot(ctx, mapcontract.PersistSnapshot{
		InstanceID: p.instanceID, Partition: p.partition, Revision: p.revision, Epoch: p.epoch, Envelope: env,
	})
	if err == nil {
		return true
	}
	if httpkit.Transient(err) && ctx.Err() == nil {
		l.Log.Warn("snapshot push failed; retrying", "partition", p.partition, "revision", p.revision, "err", err)
		return false
	}
	l.Log.Warn("snapshot push refused", "partition", p.partition, "revision", p.revision, "err", fmt.Errorf("persist snapshot: %w", err))
	return true
}
