package tickloop

import "testing"

// TestPhases_SpreadEvenly: whatever the rates, every player is due SnapshotHz times in
// TickHz ticks with gaps that differ by at most one tick, and the players due at each
// tick are as many as the rates allow (at the defaults, half of them at every tick).
func TestPhases_SpreadEvenly(t *testing.T) {
	for _, r := range [][2]int{{30, 15}, {30, 20}, {30, 30}, {60, 15}, {30, 7}, {20, 20}, {30, 1}} {
		tickHz, snapshotHz := r[0], r[1]
		l := &Loop{TickHz: tickHz, SnapshotHz: snapshotHz}
		const players, seconds = 600, 3
		phases := make([]uint64, players)
		for i := range phases {
			phases[i] = l.nextPhase()
		}
		count := make([]int, players)
		last := make([]uint64, players)
		minGap, maxGap := make([]uint64, players), make([]uint64, players)
		perTick := []int{}
		for tk := uint64(1); tk <= uint64(seconds*tickHz); tk++ {
			n := 0
			for i, ph := range phases {
				if !l.due(ph, tk-1, tk) {
					continue
				}
				n++
				if count[i] > 0 {
					gap := tk - last[i]
					if count[i] == 1 || gap < minGap[i] {
						minGap[i] = gap
					}
					maxGap[i] = max(maxGap[i], gap)
				}
				count[i]++
				last[i] = tk
			}
			perTick = append(perTick, n)
		}
		for i := range phases {
			if count[i] != seconds*snapshotHz {
				t.Fatalf("%d/%d Hz: player %d due %d times in %d s, want %d", tickHz, snapshotHz, i, count[i], seconds, seconds*snapshotHz)
			}
			if snapshotHz > 1 && maxGap[i]-minGap[i] > 1 {
				t.Fatalf("%d/%d Hz: player %d's snapshots %d to %d ticks apart", tickHz, snapshotHz, i, minGap[i], maxGap[i])
			}
		}
		want := players * snapshotHz / tickHz
		for tk, n := range perTick {
			if n < want-players/tickHz || n > want+players/tickHz {
				t.Fatalf("%d/%d Hz: %d players due at tick %d, want about %d", tickHz, snapshotHz, n, tk+1, want)
			}
		}
	}
}
