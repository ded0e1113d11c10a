package tickloop

import (
	"encoding/json"
	"errors"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// decode decodes a command's payload into the message posted to the tick: the kit's
// own players/names query here, every other command by the game.
func (s *session) decode(in *wire.Inbound, m *message) error {
	if in.Feature != wire.FeaturePlayers {
		cmd, err := s.l.decoder.Decode(in.Feature, in.Action, in.Payload)
		m.cmd = cmd
		return err
	}
	if in.Action != wire.ActionNames {
		return apierr.Errorf(wire.CodeUnknownCommand, "unknown command %s/%.32q", wire.FeaturePlayers, in.Action)
	}
	q, err := wire.DecodeNamesQuery(in.Payload)
	var we *wire.Error
	if errors.As(err, &we) {
		return apierr.Errorf(we.Code, "%s", we.Message)
	}
	m.names = &q
	return err
}

// index remembers the entity a character just joined is shown as (0: none).
func (l *Loop) index(p *player, entity uint64) {
	if entity != 0 {
		p.entity = entity
		l.entities[entity] = p
	}
}

// answerNames answers a names query with the names of the asked entities that are
// characters here, as a "names" event to the asking player alone.
func (l *Loop) answerNames(p *player, seq uint64, q *wire.NamesQuery) {
	l.Metrics.command(cmdApplied).Inc()
	out := wire.Names{Seq: seq, Names: make([]wire.PlayerName, 0, len(q.IDs))}
	for _, id := range q.IDs {
		if c := l.entities[id]; c != nil {
			out.Names = append(out.Names, wire.PlayerName{ID: id, CharacterID: c.id, Name: c.name})
		}
	}
	frame, err := json.Marshal(wire.Event{V: wire.Version, Kind: wire.KindEvent, Name: wire.EventNames, Data: out})
	if err != nil {
		l.Log.Error("encode names", "err", err)
		return
	}
	l.send(p, frame, false)
}
