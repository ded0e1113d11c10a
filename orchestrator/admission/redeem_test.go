package admission_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
)

func TestRedeem(t *testing.T) {
	ctx := context.Background()
	t.Run("ErrTicketUsed", func(t *testing.T) {
		e := newEnv(t)
		j := e.join(t, authKey)
		if r := e.redeem(t, "default-1", j.Ticket); r.CharacterID != j.CharacterID || r.Epoch != 1 || r.Kind != "join" {
			t.Fatalf("redeem %+v", r)
		}
		_, err := e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "default-1", Token: j.Ticket})
		wantCode(t, err, apierr.ETICKETUSED)
	})
	t.Run("AnswersHeldItems", func(t *testing.T) {
		e := newEnv(t)
		j := e.join(t, authKey)
		sword := items.Item{ID: "sword-1", TemplateID: "sword", Quantity: 1, Place: items.Place{CharacterID: j.CharacterID}, State: items.StateActive}
		if err := e.db.SeedItems(ctx, func(items.Ledger) ([]items.Item, error) { return []items.Item{sword}, nil }); err != nil {
			t.Fatal(err)
		}
		if r := e.redeem(t, "default-1", j.Ticket); len(r.Items) != 1 || r.Items[0].ID != "sword-1" {
			t.Fatalf("redeem answers items %+v, want the sword the character holds", r.Items)
		}
		g := e.join(t, "")
		if r := e.redeem(t, "default-1", g.Ticket); r.Items == nil || len(r.Items) != 0 {
			t.Fatalf("a guest's redeem answers items %#v, want none (and not absent)", r.Items)
		}
	})
	t.Run("ErrTicketExpired", func(t *testing.T) {
		e := newEnv(t)
		j := e.join(t, "")
		e.clock.Add(10 * time.Second)
		_, err := e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "default-1", Token: j.Ticket})
		wantCode(t, err, apierr.ETICKETEXPIRED)
	})
	t.Run("ErrTicketInvalid", func(t *testing.T) {
		e := newEnv(t)
		j := e.join(t, "")
		for _, tok := range []string{j.Ticket[:len(j.Ticket)-2], j.Ticket + "A", "", "not-a-ticket"} {
			_, err := e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "default-1", Token: tok})
			wantCode(t, err, apierr.ETICKETINVALID)
		}
	})
	t.Run("ErrWrongMap", func(t *testing.T) {
		e := newEnv(t)
		j := e.join(t, "")
		_, err := e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "frontier-1", Token: j.Ticket})
		wantCode(t, err, apierr.EWRONGMAP)
		// The refused attempt did not use the ticket up.
		e.redeem(t, "default-1", j.Ticket)
	})
	t.Run("ErrMapQuarantined", func(t *testing.T) {
		e := newEnv(t)
		j := e.join(t, "")
		e.maps.set("default-1", orchestrator.StateQuarantined)
		_, err := e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "default-1", Token: j.Ticket})
		wantCode(t, err, apierr.EMAPQUARANTINED)
	})
	t.Run("RestartBetweenIssueAndRedeem", func(t *testing.T) {
		e := newEnv(t)
		a, b := e.join(t, authKey), e.join(t, "")
		e.redeem(t, "default-1", a.Ticket)
		e.restart(t)
		// Used before the restart: still used.
		_, err := e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "default-1", Token: a.Ticket})
		wantCode(t, err, apierr.ETICKETUSED)
		// Issued before the restart, redeemed after: once.
		e.redeem(t, "default-1", b.Ticket)
		e.restart(t)
		_, err = e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "default-1", Token: b.Ticket})
		wantCode(t, err, apierr.ETICKETUSED)
	})
	t.Run("IdleGuestLeasesForgotten", func(t *testing.T) {
		e := newEnv(t)
		r := enter(t, e, "")
		if err := e.svc.Authorize(ctx, r.CharacterID, "default-1", r.Epoch); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(e.svc.GuestLeaseTTL)
		if _, err := e.svc.Sweep(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		if l, _ := e.svc.Lease(ctx, r.CharacterID); l.InstanceID != "" {
			t.Fatalf("idle guest lease kept: %+v", l)
		}
	})
	t.Run("NamesTheCharacter", func(t *testing.T) {
		// Maps show players names, not ids: a saved character's own, through a join and
		// a transfer alike, and a guest's made from its id.
		e := newEnv(t)
		r := enter(t, e, authKey)
		if r.Name != orchestrator.DefaultCharacterName {
			t.Fatalf("a new key's character is named %q, want %q", r.Name, orchestrator.DefaultCharacterName)
		}
		a, err := e.svc.RequestTransfer(ctx, transferReq("tr-n", r, "default-1", "frontier", 1))
		if err != nil {
			t.Fatal(err)
		}
		if in := e.redeem(t, "frontier-1", a.Token); in.Name != orchestrator.DefaultCharacterName {
			t.Fatalf("through a portal the character is named %q", in.Name)
		}
		g := enter(t, e, "")
		if !strings.HasPrefix(g.Name, "Guest ") || len(g.Name) != len("Guest ")+4 || strings.Contains(g.Name, g.CharacterID) {
			t.Fatalf("guest %s is named %q", g.CharacterID, g.Name)
		}
		if other := enter(t, e, ""); other.Name == g.Name {
			t.Fatalf("two guests share the name %q", g.Name)
		}
	})
	t.Run("SecondLoginTakesOver", func(t *testing.T) {
		e := newEnv(t)
		first := e.redeem(t, "default-1", e.join(t, authKey).Ticket)
		second := e.redeem(t, "default-1", e.join(t, authKey).Ticket)
		if second.Epoch <= first.Epoch {
			t.Fatalf("epochs %d then %d, want growth", first.Epoch, second.Epoch)
		}
		wantCode(t, e.svc.Authorize(ctx, first.CharacterID, "default-1", first.Epoch), apierr.ECONFLICT)
		if err := e.svc.Authorize(ctx, second.CharacterID, "default-1", second.Epoch); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRedeem_Concurrent races 100 goroutines on one ticket, 1,000 times: exactly one
// must win every time, and every loser must be told ticket_used.
func TestRedeem_Concurrent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	for round := 0; round < rounds; round++ {
		key := ""
		if round%2 == 0 {
			key = authKey // half saved characters (store-backed leases), half disposable
		}
		tok := e.join(t, key).Ticket
		var wins, used atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := 0; g < 100; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "default-1", Token: tok})
				switch apierr.Code(err) {
				case "":
					wins.Add(1)
				case apierr.ETICKETUSED:
					used.Add(1)
				default:
					t.Errorf("round %d: unexpected error %v", round, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 || used.Load() != 99 {
			t.Fatalf("round %d: %d successes and %d ticket_used, want 1 and 99", round, wins.Load(), used.Load())
		}
	}
}

// BenchmarkRedeem measures join-ticket redeems per second against the real store: a
// disposable character's redeem durably records its nonce; a saved character's also
// writes its new lease.
func BenchmarkRedeem(b *testing.B) {
	for _, kind := range []struct{ name, key string }{{"Disposable", ""}, {"Saved", authKey}} {
		b.Run(kind.name, func(b *testing.B) {
			e := newEnv(b)
			toks := make([]string, b.N)
			for i := range toks {
				toks[i] = e.join(b, kind.key).Ticket
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				e.redeem(b, "default-1", toks[i])
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "redeems/s")
		})
	}
}

// BenchmarkMassRejoin measures the rejoin after a map crash: 1,000 saved characters,
// each with its own identity and a saved state, redeem their join tickets at once
// against the real store. One op is the whole crowd; redeems/s is the figure.
func BenchmarkMassRejoin(b *testing.B) {
	const crowd = 1000
	ctx := context.Background()
	e := newEnv(b)
	keys := make([]string, crowd)
	for i := range keys {
		keys[i] = fmt.Sprintf("MassRejoinKey%011d", i)
		r := e.redeem(b, "default-1", e.join(b, keys[i]).Ticket)
		payload := json.RawMessage(`{"mapId":"default","instanceId":"default-1","x":1,"y":2}`)
		if _, err := e.db.PutSnapshot(ctx, "default-1", record.CharacterPartition(r.CharacterID), 1,
			record.NewSnapshotEnvelope("sim-1", 1, e.clock.Now().UnixMilli(), payload)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := e.db.Checkpoint(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		toks := make([]string, crowd)
		for j, k := range keys {
			toks[j] = e.join(b, k).Ticket
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, tok := range toks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, err := e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "default-1", Token: tok}); err != nil {
					b.Errorf("redeem: %v", err)
				}
			}()
		}
		b.StartTimer()
		close(start)
		wg.Wait()
	}
	b.ReportMetric(float64(crowd*b.N)/b.Elapsed().Seconds(), "redeems/s")
}
