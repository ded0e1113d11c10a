package conform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/mapyard/mapyard/docs/schemas"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// checkHeartbeats waits for the default map's heartbeats: at least two answered
// registered, and one since its player's welcome that counts the player.
func (r *runner) checkHeartbeats(ctx context.Context) error {
	tap := r.setup.tap
	var why error
	err := tap.wait(ctx, "heartbeats", func() bool {
		registered, counted := 0, r.p1 == nil
		for _, c := range tap.find(mapcontract.PathMapHeartbeat, func(c call) bool { return c.Instance == r.a }) {
			if err := r.validateRequest(c); err != nil {
				why = err
				return true
			}
			var h mapcontract.Heartbeat
			var a mapcontract.HeartbeatAnswer
			if c.Status == http.StatusOK && json.Unmarshal(c.Answer, &a) == nil && a.Registered {
				registered++
			}
			if json.Unmarshal(c.Body, &h) == nil && h.Players >= 1 && r.p1 != nil && c.At.After(r.welcome) {
				counted = true
			}
		}
		switch {
		case registered < 2:
			why = fmt.Errorf("%d heartbeats answered registered, want 2 within ORCH_HEARTBEAT_TIMEOUT_MS", registered)
		case !counted:
			why = errors.New("no heartbeat since the player's welcome counts it (players: 0)")
		default:
			why = nil
			return true
		}
		return false
	})
	if why != nil {
		return why
	}
	return err
}

// pushLedger follows one character through the traffic: the epochs its redeems gave
// each instance, and the revision every later push must be above.
type pushLedger struct {
	floor    int64
	last     *call
	epochs   map[string]map[int64]bool // by instance
	maxEpoch map[string]int64
}

// checkPushes reads every character push of the run in arrival order against the
// redeems before it: per schema, quoting an epoch a redeem gave that instance, a
// revision above the redeemed state's and every earlier push's (a repeat of the very
// same push is a harmless retry), accepted, and carrying the seeded attributes
// unchanged. A push refused because a newer redeem took the character over is the
// orchestrator doing its job, not the map failing.
func (r *runner) checkPushes(ctx context.Context) error {
	chars := map[string]*pushLedger{}
	ledger := func(id string) *pushLedger {
		if chars[id] == nil {
			chars[id] = &pushLedger{epochs: map[string]map[int64]bool{}, maxEpoch: map[string]int64{}}
		}
		return chars[id]
	}
	var problems []string
	pushes := 0
	for _, c := range r.setup.tap.find("", nil) {
		switch c.Path {
		case mapcontract.PathRedeem:
			var res mapcontract.RedeemResult
			if c.Status != http.StatusOK || json.Unmarshal(c.Answer, &res) != nil {
				continue
			}
			l := ledger(res.CharacterID)
			if l.epochs[c.Instance] == nil {
				l.epochs[c.Instance] = map[int64]bool{}
			}
			l.epochs[c.Instance][res.Epoch] = true
			l.maxEpoch[c.Instance] = max(l.maxEpoch[c.Instance], res.Epoch)
			if res.State != nil {
				l.floor = max(l.floor, res.State.Revision)
			}
		case mapcontract.PathPersistSnapshot:
			var p mapcontract.PersistSnapshot
			if r.validateRequest(c) != nil || json.Unmarshal(c.Body, &p) != nil {
				problems = append(problems, fmt.Sprintf("a push breaks its schema: %v", r.validateRequest(c)))
				continue
			}
			id, ok := record.CharacterOfPartition(p.Partition)
			if !ok {
				continue
			}
			pushes++
			if why := r.checkPush(c, p, ledger(id), id); why != "" {
				problems = append(problems, why)
			}
		}
	}
	switch {
	case len(problems) > 0:
		return errors.New(summarize(problems))
	case pushes == 0:
		return errors.New("no character push seen: a map MUST push every character it holds when it stops")
	}
	return nil
}

// checkPush judges one push of character id against its ledger, which it then moves
// on; it returns why the push breaks the contract, or "".
func (r *runner) checkPush(c call, p mapcontract.PersistSnapshot, l *pushLedger, id string) string {
	retry := l.last != nil && bytes.Equal(l.last.Body, c.Body)
	defer func() {
		l.floor, l.last = max(l.floor, p.Revision), &c
	}()
	if !l.epochs[p.InstanceID][p.Epoch] {
		return fmt.Sprintf("a push of %s quotes epoch %d, which no redeem gave %s", p.Partition, p.Epoch, p.InstanceID)
	}
	if p.Revision <= l.floor && !retry {
		return fmt.Sprintf("revision %d of %s is not above %d (the redeemed state's, or an earlier push's)", p.Revision, p.Partition, l.floor)
	}
	switch {
	case c.Status == http.StatusOK:
		var a mapcontract.PersistSnapshotAnswer
		if json.Unmarshal(c.Answer, &a) != nil || (!a.Accepted && !retry) {
			return fmt.Sprintf("a push of %s at revision %d was answered %s", p.Partition, p.Revision, brief(c.Answer))
		}
	case (c.Status == http.StatusForbidden || c.Status == http.StatusConflict) && l.maxEpoch[p.InstanceID] > p.Epoch:
		// Taken over by a newer redeem: the map learns it from this answer.
	default:
		return fmt.Sprintf("a push of %s was refused HTTP %d %s", p.Partition, c.Status, brief(c.Answer))
	}
	if want, ok := r.seeded[id]; ok {
		var payload record.CharacterStatePayload
		if err := json.Unmarshal(p.Envelope.Payload, &payload); err != nil {
			return fmt.Sprintf("a push of %s: payload %v", p.Partition, err)
		}
		if !attributesKept(want, payload.Attributes) {
			got := brief(payload.Attributes)
			if got == "" {
				got = "none"
			}
			return fmt.Sprintf("a push of %s changed attributes it does not know: %s, want %s kept", p.Partition, got, want)
		}
	}
	return ""
}

// attributesKept reports whether every top-level attribute of want is in got with the
// same value; a game MAY add attributes of its own.
func attributesKept(want, got json.RawMessage) bool {
	var w, g map[string]json.RawMessage
	if json.Unmarshal(want, &w) != nil || json.Unmarshal(got, &g) != nil {
		return false
	}
	for k, v := range w {
		if !jsonEqual(v, g[k]) {
			return false
		}
	}
	return true
}

// errorCode is the code of an error answer, or "".
func errorCode(answer []byte) string {
	var e httpkit.ErrorResponse
	_ = json.Unmarshal(answer, &e)
	return e.Error.Code
}

// leaseBound are the routes a map calls for a character it holds: a refusal there
// (403, 409) may mean the character was taken over, which the map learns from it.
var leaseBound = map[string]bool{
	mapcontract.PathPersistSnapshot: true, mapcontract.PathPersistCritical: true,
	"/orch/persist-critical-events": true, "/orch/character-items": true, mapcontract.PathRequestTransfer: true,
}

// checkCalls checks every call the maps made in the run: a POST of JSON to a route of
// the contract, per its schema, with a credential the orchestrator took (never 401
// unauthorized), acting only for the instance its container runs (never 403 outside
// the routes a lease decides). A 401 with another code is a player's ticket refused,
// which the map passes on. A blank pool map's call under its pool id that crossed its
// handout (403: its container now runs the instance) is a race every map runs into,
// not a fault, until the map has called as its instance once.
func (r *runner) checkCalls(ctx context.Context) error {
	calls := r.setup.tap.find("", nil)
	var problems []string
	asInstance := map[string]bool{} // credentials that called as an instance already
	for _, c := range calls {
		if why := r.callProblem(c, asInstance[c.Credential]); why != "" {
			problems = append(problems, fmt.Sprintf("%s %s: %s", c.Method, c.Path, why))
		}
		if c.Instance != "" && !strings.HasPrefix(c.Instance, mapgen.PoolIDPrefix) {
			asInstance[c.Credential] = true
		}
	}
	if len(calls) == 0 {
		return errors.New("the maps made no call")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d of %d calls: %s", len(problems), len(calls), summarize(problems))
	}
	return nil
}

// callProblem says what is wrong with one call, or "". handedOut is whether the same
// credential called as an instance before.
func (r *runner) callProblem(c call, handedOut bool) string {
	_, _, known := schemas.ForRoute(c.Path)
	pooled := strings.HasPrefix(c.Instance, mapgen.PoolIDPrefix)
	switch {
	case !known || !strings.HasPrefix(c.Path, "/orch/"):
		return "not a route of the contract"
	case c.Method != http.MethodPost:
		return "not a POST"
	case !strings.HasPrefix(c.ContentType, "application/json"):
		return fmt.Sprintf("Content-Type %q, want application/json", c.ContentType)
	case c.Credential == "":
		return "no X-Mapyard-Secret"
	case c.Status == http.StatusUnauthorized && errorCode(c.Answer) == apierr.EUNAUTHORIZED:
		return "its credential was refused: " + brief(c.Answer)
	case c.Status == http.StatusForbidden && pooled && !handedOut:
		// Crossed its handout.
	case c.Status == http.StatusForbidden && !leaseBound[c.Path]:
		return "refused 403: " + brief(c.Answer)
	}
	if err := r.validateRequest(c); err != nil {
		return err.Error()
	}
	return ""
}

// summarize joins the first distinct problems of a list, saying how many more there
// were: one broken rule is often broken by every message.
func summarize(problems []string) string {
	const shown = 3
	var distinct []string
	for _, p := range problems {
		if !slices.Contains(distinct, p) {
			distinct = append(distinct, p)
		}
	}
	distinct = distinct[:min(shown, len(distinct))]
	out := strings.Join(distinct, "; ")
	if len(problems) > len(distinct) {
		out += fmt.Sprintf(" (%d in all)", len(problems))
	}
	return out
}
