package main

// Seed 000's criterion 8: critical events survive a crash of the orchestrator. See
// seed000_test.go.

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
)

// TestSeed000_8_AcknowledgedPickupsSurviveOrchestratorKill lets players walk a map
// strewn with items and pick them up one after another, without waiting for the
// answers, while the orchestrator is killed with SIGKILL and started again. A pickup
// sent while it is dead is answered once it is back, or refused with map_unavailable
// once the map sees it away, changing nothing. After the restart every pickup
// acknowledged before the kill (the item_picked event its player got) is in the
// database; in the end (after a second SIGKILL) every acknowledged pickup is there
// exactly once, as one critical event and the item held by its player, no item is both
// held and on the ground, none of the map's items is gone, nothing is held that was
// not acknowledged, and PRAGMA integrity_check is ok.
func TestSeed000_8_AcknowledgedPickupsSurviveOrchestratorKill(t *testing.T) {
	k := newKit(t)
	loot := lootMap(t, k.deployment+"-loot", 200, 15)
	k.createMap(t, loot)
	ground := seededItems(t, k.dbPath, loot)
	if len(ground) < 100 {
		t.Fatalf("the loot map seeded %d items", len(ground))
	}

	// Three players, each with a stripe of the map's items to itself, starting at the
	// item nearest the middle of its stripe.
	const n = 3
	pickers := make([]*picker, n)
	for i := range pickers {
		lo, hi := float64(i)*200/n, float64(i+1)*200/n
		p := &picker{sent: map[string]time.Time{}, seqs: map[uint64]string{}, acked: map[string]time.Time{}, refused: map[string]string{}}
		for _, it := range ground {
			if x := float64(it.Place.X) / 100; x >= lo+1 && x < hi-1 {
				p.todo = append(p.todo, it)
			}
		}
		p.next = p.nearest((lo+hi)/2, 100)
		p.c = k.enterAt(t, loot, float64(p.next.Place.X)/100, float64(p.next.Place.Y)/100+0.5, client.Options{})
		p.character = p.c.Welcome().CharacterID
		pickers[i] = p
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, n)
	for _, p := range pickers {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- p.run(stop) }()
	}
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer halt()
	each := func(what string, cond func(*picker) bool) {
		t.Helper()
		waitFor(t, what, 60*time.Second, func() bool {
			for _, p := range pickers {
				if !cond(p) {
					return false
				}
			}
			return true
		})
	}

	each("two acknowledged pickups per player", func(p *picker) bool { return p.count(time.Time{}) >= 2 })
	if err := k.orch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	k.orch.wait(10 * time.Second)
	killedAt := time.Now()
	before := map[string]string{}
	for _, p := range pickers {
		for id := range p.snapshot(killedAt) {
			before[id] = p.character
		}
	}
	each("a pickup per player sent while the orchestrator is dead", func(p *picker) bool { return p.sentAfter(killedAt) >= 1 })
	restartAt := time.Now()
	inFlight := map[string]bool{}
	for _, p := range pickers {
		p.mu.Lock()
		for id, at := range p.sent {
			if at.After(killedAt) {
				inFlight[id] = true
			}
		}
		p.mu.Unlock()
	}
	for _, p := range pickers {
		if early := p.ackedBefore(killedAt, restartAt); len(early) != 0 {
			t.Fatalf("pickups %v sent while the orchestrator was dead were acknowledged before it restarted", early)
		}
	}
	k.restart(t)
	down := time.Since(killedAt)

	// Every pickup acknowledged before the kill is in the database of the new orchestrator.
	db := readDB(t, k.dbPath)
	for id, character := range before {
		if held := heldBy(t, db, id); len(held) != 1 || held[0] != character {
			t.Fatalf("after the restart item %s is held by %v, want %s once", id, held, character)
		}
	}
	each("two pickups per player sent after the kill acknowledged", func(p *picker) bool { return p.countSentAfter(killedAt) >= 2 })
	halt()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	acked, refused := map[string]string{}, map[string]string{}
	for _, p := range pickers {
		for id := range p.snapshot(time.Now()) {
			acked[id] = p.character
		}
		p.mu.Lock()
		unanswered := len(p.sent) - len(p.acked) - len(p.refused)
		for id, code := range p.refused {
			refused[id] = code
		}
		p.mu.Unlock()
		if unanswered != 0 {
			t.Fatalf("player %s: %d pickups never answered", p.character, unanswered)
		}
	}

	// What was sent to a dead orchestrator either waited for it and became durable, or,
	// once the map saw the orchestrator away, was refused with map_unavailable and
	// changed nothing (the database checks below hold it to that).
	for id := range inFlight {
		if acked[id] == "" && refused[id] != apierr.EMAPUNAVAILABLE {
			t.Errorf("pickup of %s, sent while the orchestrator was dead, was neither acknowledged nor refused with map_unavailable (refused: %q)", id, refused[id])
		}
	}

	// A second crash, at a quiet moment, then the file as the next start finds it.
	if err := k.orch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	k.orch.wait(10 * time.Second)
	db.Close()
	rw, err := sql.Open("sqlite", sqlite.DSN(k.dbPath, false))
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	var integrity string
	if err := rw.QueryRow(`PRAGMA integrity_check`).Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check: %q (%v)", integrity, err)
	}
	events := pickupEvents(t, rw, loot.InstanceID)
	for id, character := range acked {
		if held := heldBy(t, rw, id); len(held) != 1 || held[0] != character {
			t.Errorf("acknowledged pickup of %s: held by %v, want %s once", id, held, character)
		}
		if events[id] != 1 {
			t.Errorf("acknowledged pickup of %s: %d critical events, want 1", id, events[id])
		}
	}
	var both, live, total int
	if err := rw.QueryRow(`SELECT count(*) FROM inventory_items WHERE owner_character_id IS NOT NULL AND location_instance_id IS NOT NULL`).Scan(&both); err != nil || both != 0 {
		t.Errorf("%d items both held and on the ground (%v)", both, err)
	}
	held := 0
	for _, it := range ground {
		var owner, place sql.NullString
		var q int64
		var state string
		err := rw.QueryRow(`SELECT owner_character_id, location_instance_id, quantity, state FROM inventory_items WHERE item_id = ?`, it.ID).Scan(&owner, &place, &q, &state)
		if err != nil {
			t.Fatalf("item %s: %v", it.ID, err)
		}
		total++
		if state == "active" && q == it.Quantity {
			live++
		}
		if owner.Valid {
			held++
			if acked[it.ID] != owner.String {
				t.Errorf("item %s is held by %s without an acknowledged pickup", it.ID, owner.String)
			}
		} else if place.String != loot.InstanceID {
			t.Errorf("item %s is neither held nor on the loot map (%q)", it.ID, place.String)
		}
	}
	if total != len(ground) || live != len(ground) {
		t.Errorf("of %d items %d are left and %d live with their quantity", len(ground), total, live)
	}
	if held != len(acked) {
		t.Errorf("%d items held, %d pickups acknowledged", held, len(acked))
	}
	t.Logf("seed 000 criterion 8: %d pickups acknowledged (%d before the kill), %d refused %v; %d sent while the orchestrator was dead for %s, "+
		"acknowledged after its restart; %d items, none lost or doubled", len(acked), len(before), len(refused), refused, len(inFlight), down.Round(time.Millisecond), len(ground))
}

// heldBy lists the characters holding item id (a live row with no world place).
func heldBy(t *testing.T, db *sql.DB, id string) []string {
	t.Helper()
	rows, err := db.Query(`SELECT owner_character_id FROM inventory_items
		WHERE item_id = ? AND state = 'active' AND owner_character_id IS NOT NULL AND location_instance_id IS NULL`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// pickupEvents counts the item_pickup critical events of instance by item id.
func pickupEvents(t *testing.T, db *sql.DB, instance string) map[string]int {
	t.Helper()
	rows, err := db.Query(`SELECT payload FROM critical_events WHERE kind = ? AND instance_id = ?`, string(items.KindPickup), instance)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var raw []byte
		var p items.Payload
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatalf("pickup payload %s: %v", raw, err)
		}
		out[p.Move.ItemID]++
	}
	return out
}

// picker is one player picking up the items of its list, nearest first, sending each
// pickup as soon as it stands by the item and walking on without waiting for the
// answer, as an impatient player would.
type picker struct {
	c         *client.Client
	character string
	todo      []items.Item // items still to pick up
	next      items.Item   // the first one

	mu      sync.Mutex
	sent    map[string]time.Time // item id → when its pickup was sent
	seqs    map[uint64]string    // command seq → item id
	acked   map[string]time.Time // item id → when its item_picked arrived
	refused map[string]string    // item id → the refusal's code
}

// nearest removes and returns the item of the list nearest to (x, y).
func (p *picker) nearest(x, y float64) items.Item {
	best := 0
	for i, it := range p.todo {
		if itemDistance(it, x, y) < itemDistance(p.todo[best], x, y) {
			best = i
		}
	}
	it := p.todo[best]
	p.todo = append(p.todo[:best], p.todo[best+1:]...)
	return it
}

func itemDistance(it items.Item, x, y float64) float64 {
	return math.Hypot(float64(it.Place.X)/100-x, float64(it.Place.Y)/100-y)
}

// run picks up items until stop is closed, then waits (up to 30 s) until every pickup
// it sent is answered.
func (p *picker) run(stop <-chan struct{}) error {
	next := p.next // the one it entered beside
	for {
		select {
		case <-stop:
			return p.drain()
		default:
		}
		tx, ty := float64(next.Place.X)/100, float64(next.Place.Y)/100
		if _, err := steer(p.c, tx, ty, 1, nil, p.note); err != nil {
			return fmt.Errorf("%s: %w", p.character, err)
		}
		seq, err := p.c.Command("items", "pickup", map[string]string{"itemId": next.ID})
		if err != nil {
			return fmt.Errorf("%s: pickup: %w", p.character, err)
		}
		p.mu.Lock()
		p.sent[next.ID], p.seqs[seq] = time.Now(), next.ID
		p.mu.Unlock()
		if len(p.todo) == 0 {
			<-stop
			return p.drain()
		}
		next = p.nearestUnder(tx, ty)
	}
}

func (p *picker) nearestUnder(x, y float64) items.Item {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nearest(x, y)
}

// drain reads events until every sent pickup is answered.
func (p *picker) drain() error {
	deadline := time.After(30 * time.Second)
	for {
		p.mu.Lock()
		open := len(p.sent) - len(p.acked) - len(p.refused)
		p.mu.Unlock()
		if open == 0 {
			return nil
		}
		select {
		case e := <-p.c.Events():
			if e.Kind == "closed" {
				return fmt.Errorf("%s: connection closed with %d pickups unanswered: %v", p.character, open, e.Err)
			}
			p.note(e)
		case <-deadline:
			return fmt.Errorf("%s: %d pickups unanswered after 30 s", p.character, open)
		}
	}
}

// note records the answer an event gives to one of the player's pickups.
func (p *picker) note(e client.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, who, ok := picked(e); ok && who == p.character {
		if _, mine := p.sent[id]; mine {
			p.acked[id] = time.Now()
		}
	}
	if e.Kind == "error" && e.Error != nil {
		if id, ok := p.seqs[e.Error.Seq]; ok {
			p.refused[id] = e.Error.Code
		}
	}
}

// count is how many pickups were acknowledged after since.
func (p *picker) count(since time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.acked {
		if at.After(since) {
			n++
		}
	}
	return n
}

// snapshot returns the pickups acknowledged before at.
func (p *picker) snapshot(at time.Time) map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]bool{}
	for id, when := range p.acked {
		if !when.After(at) {
			out[id] = true
		}
	}
	return out
}

// sentAfter is how many pickups were sent after at.
func (p *picker) sentAfter(at time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, when := range p.sent {
		if when.After(at) {
			n++
		}
	}
	return n
}

// countSentAfter is how many pickups sent after at were acknowledged.
func (p *picker) countSentAfter(at time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for id := range p.acked {
		if p.sent[id].After(at) {
			n++
		}
	}
	return n
}

// ackedBefore lists the pickups sent after sent that were acknowledged before at, sorted.
func (p *picker) ackedBefore(sent, at time.Time) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for id, when := range p.acked {
		if p.sent[id].After(sent) && when.Before(at) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}
