package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// TestStorageFull fills the database until SQLite itself refuses to grow it
// (SQLITE_FULL, from a page limit on the write connection, as a full disk answers):
// the write is refused storage_full, counted and logged once, everything written
// before is still there, and once the limit is lifted writes resume on the same
// connection with nothing reopened.
func TestStorageFull(t *testing.T) {
	var logs bytes.Buffer
	db := NewDB(filepath.Join(t.TempDir(), "mapyard.db"))
	db.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	db.Metrics = NewMetrics(prometheus.NewRegistry())
	db.CheckpointInterval = -1
	if err := db.Open(); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	expires := time.Now().Add(time.Hour)
	nonce := func(i int) string { return fmt.Sprintf("n-%04d-%s", i, strings.Repeat("x", 90)) }
	for i := range 20 {
		if err := db.UseNonce(ctx, nonce(i), expires); err != nil {
			t.Fatal(err)
		}
	}
	var pages int
	if err := db.write.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.write.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages)); err != nil {
		t.Fatal(err)
	}
	refused, i := 0, 20
	for ; i < 5000 && refused < 3; i++ {
		err := db.UseNonce(ctx, nonce(i), expires)
		if err == nil {
			continue
		}
		if apierr.Code(err) != apierr.ESTORAGEFULL {
			t.Fatalf("write %d refused %v, want storage_full", i, err)
		}
		refused++
	}
	if refused == 0 {
		t.Fatalf("%d writes past the page limit all worked", i-20)
	}
	if got := testutil.ToFloat64(db.Metrics.full); got != float64(refused) {
		t.Errorf("mapyard_db_storage_full_total = %v, want %d", got, refused)
	}
	if n := strings.Count(logs.String(), "database storage full"); n != 1 {
		t.Errorf("logged the full storage %d times, want once:\n%s", n, logs.String())
	}
	// Everything acknowledged before is kept: each nonce is still used.
	for j := range 20 {
		if err := db.UseNonce(ctx, nonce(j), expires); apierr.Code(err) != apierr.ETICKETUSED {
			t.Fatalf("nonce %d after the full storage: %v, want ticket_used", j, err)
		}
	}
	if _, err := db.write.ExecContext(ctx, `PRAGMA max_page_count = 1073741823`); err != nil {
		t.Fatal(err)
	}
	if err := db.UseNonce(ctx, nonce(i), expires); err != nil {
		t.Fatalf("a write once space returned: %v", err)
	}
	if !strings.Contains(logs.String(), "database storage available again") {
		t.Errorf("no line says writes resumed:\n%s", logs.String())
	}
	if err := db.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
}
