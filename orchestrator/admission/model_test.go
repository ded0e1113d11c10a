package admission_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/admission"
)

// model is the test's picture of the world around the admission service: what each map
// believes it holds, tickets and tokens in flight, and the last state whose save was
// acknowledged for each saved character.
type model struct {
	t       *testing.T
	e       *env
	rng     *rand.Rand
	maps    []string
	beliefs map[string]map[string]int64 // instance → character → epoch the map holds it at
	tickets []pendingTicket
	accepts []acceptedTransfer // redeemed transfer tokens awaiting a result
	acked   map[string]float64 // saved character → X of its last acknowledged hand-over
	keys    []string
	charOf  map[string]string // authKey → character id
	nextID  int
}

type pendingTicket struct {
	token, to, character string
}

type acceptedTransfer struct {
	transferID, to string
}

// TestModel runs random interleavings of join, redeem (also at the wrong map), transfer
// request, transfer result, token expiry and map crash over three map instances, and
// checks after every step that no character is authoritative in two instances and no
// acknowledged state was lost.
func TestModel(t *testing.T) {
	steps := 10000
	if testing.Short() {
		steps = 1000
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	e := newEnv(t)
	m := &model{
		t: t, e: e, rng: rand.New(rand.NewPCG(seed, 1)),
		maps: []string{"default-1", "frontier-1", "cave-1"}, beliefs: map[string]map[string]int64{},
		acked: map[string]float64{}, charOf: map[string]string{},
	}
	for _, id := range m.maps {
		m.beliefs[id] = map[string]int64{}
	}
	for i := 0; i < 4; i++ {
		m.keys = append(m.keys, fmt.Sprintf("model-key-%02d-abcdefghijklmnop", i))
	}
	ops := map[string]int{}
	for step := 0; step < steps; step++ {
		op := m.step()
		ops[op]++
		if err := m.check(); err != nil {
			t.Fatalf("step %d (%s), seed %d: %v", step, op, seed, err)
		}
	}
	t.Logf("operations: %v", ops)
	for _, op := range []string{"redeem join", "redeem transfer", "transfer", "transfer result true", "transfer result false"} {
		if ops[op] == 0 {
			t.Errorf("the run never reached %q: the model explores too little", op)
		}
	}
}

func (m *model) step() string {
	ctx := context.Background()
	switch n := m.rng.IntN(100); {
	case n < 20:
		key := ""
		if m.rng.IntN(4) > 0 {
			key = m.keys[m.rng.IntN(len(m.keys))]
		}
		res, err := m.e.svc.Join(ctx, public.JoinRequest{AuthKey: key})
		if err != nil {
			m.expect(err, apierr.EMAPQUARANTINED, apierr.EMAPUNAVAILABLE)
			return "join refused"
		}
		if key != "" {
			m.charOf[key] = res.CharacterID
		}
		m.tickets = append(m.tickets, pendingTicket{res.Ticket, res.InstanceID, res.CharacterID})
		return "join"
	case n < 45 && len(m.tickets) > 0:
		i := m.rng.IntN(len(m.tickets))
		p := m.tickets[i]
		at := p.to
		if m.rng.IntN(8) == 0 {
			at = m.maps[m.rng.IntN(len(m.maps))]
		}
		res, err := m.e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: at, Token: p.token})
		if err != nil {
			m.expect(err, apierr.ETICKETUSED, apierr.ETICKETEXPIRED, apierr.EWRONGMAP, apierr.EMAPQUARANTINED, apierr.EMAPUNAVAILABLE)
			if apierr.Code(err) != apierr.EWRONGMAP {
				m.tickets = append(m.tickets[:i], m.tickets[i+1:]...)
			}
			return "redeem refused"
		}
		if at != p.to {
			m.t.Fatalf("redeemed a ticket for %s at %s", p.to, at)
		}
		m.tickets = append(m.tickets[:i], m.tickets[i+1:]...)
		if want, ok := m.acked[res.CharacterID]; ok && res.Kind == "transfer" && (res.State == nil || res.State.X != want) {
			m.t.Fatalf("destination got state %+v, want the acknowledged X=%v", res.State, want)
		}
		m.beliefs[at][res.CharacterID] = res.Epoch
		if res.Kind == "transfer" {
			m.accepts = append(m.accepts, acceptedTransfer{res.TransferID, at})
		}
		return "redeem " + res.Kind
	case n < 65:
		from := m.maps[m.rng.IntN(len(m.maps))]
		for _, ch := range sortedKeys(m.beliefs[from]) {
			epoch := m.beliefs[from][ch]
			to := m.maps[m.rng.IntN(len(m.maps))]
			if to == from {
				return "no transfer"
			}
			m.nextID++
			x := float64(m.nextID)
			a, err := m.e.svc.RequestTransfer(ctx, mapcontract.TransferRequest{
				TransferID: fmt.Sprintf("tr-%d", m.nextID), CharacterID: ch, FromInstanceID: from, ToInstanceID: to,
				Epoch: epoch, State: record.CharacterState{MapID: from, X: x, Revision: int64(m.nextID)},
			})
			if err != nil {
				m.expect(err, apierr.ECONFLICT, apierr.EFORBIDDEN, apierr.EMAPQUARANTINED, apierr.EMAPUNAVAILABLE)
				if code := apierr.Code(err); code == apierr.ECONFLICT || code == apierr.EFORBIDDEN {
					delete(m.beliefs[from], ch) // the map learns it lost the character
				}
				return "transfer refused"
			}
			delete(m.beliefs[from], ch) // the source stops simulating the character
			if !admission.IsDisposable(ch) {
				m.acked[ch] = x
			}
			m.tickets = append(m.tickets, pendingTicket{a.Token, to, ch})
			return "transfer"
		}
		return "no transfer"
	case n < 75 && len(m.accepts) > 0:
		i := m.rng.IntN(len(m.accepts))
		a := m.accepts[i]
		m.accepts = append(m.accepts[:i], m.accepts[i+1:]...)
		ok := m.rng.IntN(4) > 0
		err := m.e.svc.TransferResult(ctx, mapcontract.TransferResult{TransferID: a.transferID, InstanceID: a.to, Success: ok})
		if err != nil {
			m.expect(err, apierr.ECONFLICT)
		}
		return fmt.Sprintf("transfer result %v", ok)
	case n < 85:
		m.e.clock.Add(time.Duration(m.rng.IntN(12)) * time.Second)
		if _, err := m.e.svc.Sweep(ctx, time.Second); err != nil {
			m.t.Fatal(err)
		}
		return "time passes"
	case n < 92:
		id := m.maps[m.rng.IntN(len(m.maps))]
		m.beliefs[id] = map[string]int64{} // a crashed map forgets everyone
		st := []orchestrator.InstanceState{orchestrator.StateUnhealthy, orchestrator.StateQuarantined}[m.rng.IntN(2)]
		m.e.maps.set(id, st)
		return "crash " + id
	default:
		id := m.maps[m.rng.IntN(len(m.maps))]
		m.e.maps.set(id, orchestrator.StateReady)
		return "recover " + id
	}
}

// check asserts the invariants: for every character at most one map can act for it (its
// claim passes Authorize), and every saved character's durable state is its last
// acknowledged hand-over. Maps drop claims the orchestrator refuses, as real maps do.
func (m *model) check() error {
	ctx := context.Background()
	holders := map[string][]string{}
	for _, id := range m.maps {
		for _, ch := range sortedKeys(m.beliefs[id]) {
			epoch := m.beliefs[id][ch]
			if m.e.svc.Authorize(ctx, ch, id, epoch) == nil {
				holders[ch] = append(holders[ch], id)
			} else {
				delete(m.beliefs[id], ch)
			}
		}
	}
	for ch, ids := range holders {
		if len(ids) > 1 {
			return fmt.Errorf("character %s is authoritative in %v", ch, ids)
		}
	}
	for ch, x := range m.acked {
		st, err := m.e.db.CharacterState(ctx, ch)
		if err != nil {
			return fmt.Errorf("state of %s: %v", ch, err)
		}
		if st.X != x {
			return fmt.Errorf("state of %s has X=%v, want the acknowledged %v", ch, st.X, x)
		}
	}
	return nil
}

func (m *model) expect(err error, codes ...string) {
	m.t.Helper()
	got := apierr.Code(err)
	for _, c := range codes {
		if got == c {
			return
		}
	}
	m.t.Fatalf("unexpected error %v (want one of %v)", err, codes)
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
