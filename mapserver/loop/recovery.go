package loop

import (
	"errors"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// recover sends the critical events the game's maintenance pass decided this tick. An
// event the link does not take (its queue is full, or it is closed) is answered at once
// with map_unavailable: the game frees what it held and decides again at a later pass.
func (l *Loop) recover() {
	rg, ok := l.game.(Recoveries)
	if !ok {
		return
	}
	for _, ev := range rg.Recoveries() {
		id := ev.EventID
		err := l.Link.Critical(ev, func(_ record.CriticalAck, err error) {
			l.post(message{op: opRecovery, eventID: id, answer: err})
		})
		if err != nil {
			l.Log.Warn("recovery not sent", "event", id, "err", err)
			rg.Recovered(id, apierr.Errorf(apierr.EMAPUNAVAILABLE, "the map cannot reach the orchestrator now"))
		}
	}
}

// recovered hands the orchestrator's answer to a recovery back to the game and shows the
// recovered item to the players who see its anchor, only once it is durable.
func (l *Loop) recovered(eventID string, answer error) {
	rg, ok := l.game.(Recoveries)
	if !ok {
		return
	}
	var public *apierr.Error
	if answer != nil {
		if errors.As(answer, &public) {
			l.Log.Info("recovery refused", "event", eventID, "code", public.Code, "message", public.Message)
		} else {
			l.Log.Warn("recovery not made durable", "event", eventID, "err", answer)
		}
	} else {
		l.Log.Info("critical item recovered", "event", eventID)
	}
	if ev := rg.Recovered(eventID, answer); ev.Frame != nil {
		l.notify(ev)
	}
}
