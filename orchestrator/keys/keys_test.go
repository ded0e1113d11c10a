package keys_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/orchestrator/keys"
	"github.com/mapyard/mapyard/orchestrator/testutil"
	"github.com/mapyard/mapyard/orchestrator/ticket"
)

const secret = "an-old-hosts-stored-secret-0123456789"

func TestNewRoot(t *testing.T) {
	if _, err := keys.NewRoot("short"); err == nil {
		t.Fatal("a 5-character root was accepted")
	}
}

// TestDeriveKeepsOldKeys pins the derivations an upgraded host depends on: the stored
// secret becomes the root, and the authKey-hash and ticket keys stay what they were, so
// saved characters are still found by their players' keys.
func TestDeriveKeepsOldKeys(t *testing.T) {
	r := testutil.Root(t, secret)
	old := func(purpose string) []byte {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(purpose))
		return m.Sum(nil)
	}
	if !hmac.Equal(r.TicketKey(), old("mapyard ticket signing v1")) {
		t.Error("ticket key changed")
	}
	if !hmac.Equal(r.AuthKeyHashKey(), old("mapyard authkey hash v1")) {
		t.Error("authKey hash key changed")
	}
	authKey := strings.Repeat("k", 22)
	got, err := ticket.NewKeyHasher(r.AuthKeyHashKey()).Hash(authKey)
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, r.AuthKeyHashKey())
	m.Write([]byte(authKey))
	if want := base64.RawURLEncoding.EncodeToString(m.Sum(nil)); got != want {
		t.Errorf("authKey hash = %s, the root's key gives %s", got, want)
	}
}

// TestDeriveSeparatesPurposes checks that no two purposes share a key and that the root
// itself is none of them.
func TestDeriveSeparatesPurposes(t *testing.T) {
	r := testutil.Root(t, secret)
	seen := map[string]string{secret: "root"}
	for _, p := range []string{keys.PurposeTicket, keys.PurposeAuthKeyHash, keys.PurposeMapCredential, keys.PurposeOrchCredential} {
		k := string(r.Derive(p))
		if other, dup := seen[k]; dup {
			t.Errorf("%q and %q derive the same key", p, other)
		}
		seen[k] = p
	}
}

func TestMapCredential(t *testing.T) {
	r := testutil.Root(t, secret)
	a := keys.Identity{InstanceID: "forest-1", Generation: keys.NewGeneration()}
	cred, err := r.MapCredential(a)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cred, secret) {
		t.Fatal("the credential carries the root")
	}

	t.Run("Verified", func(t *testing.T) {
		got, err := r.VerifyMapCredential(cred)
		if err != nil {
			t.Fatal(err)
		}
		if got != a {
			t.Fatalf("identity = %v, want %v", got, a)
		}
	})
	t.Run("RecomputedAfterRestart", func(t *testing.T) {
		again, err := testutil.Root(t, secret).MapCredential(a)
		if err != nil || again != cred {
			t.Fatalf("a new Root over the same secret gives %q (%v), want %q", again, err, cred)
		}
	})

	mac := cred[strings.LastIndexByte(cred, '.')+1:]
	flip := []byte(mac)
	flip[0] ^= 1
	for name, bad := range map[string]string{
		"Empty":              "",
		"Root":               secret,
		"OtherInstance":      "mc1.default-1." + a.Generation + "." + mac,
		"OtherGeneration":    "mc1.forest-1.0000000000000000." + mac,
		"TamperedMAC":        "mc1.forest-1." + a.Generation + "." + string(flip),
		"Truncated":          cred[:len(cred)-1],
		"ExtraField":         cred + ".x",
		"OtherRoot":          mustCred(t, testutil.Root(t, secret+"-other"), a),
		"OrchCredential":     mustOrch(t, r, a),
		"BadInstancePattern": "mc1.Forest_1." + a.Generation + "." + mac,
	} {
		t.Run("Refused"+name, func(t *testing.T) {
			_, err := r.VerifyMapCredential(bad)
			if got, want := apierr.Code(err), apierr.EUNAUTHORIZED; got != want {
				t.Fatalf("code = %q, want %q", got, want)
			}
		})
	}
}

func TestOrchCredential(t *testing.T) {
	r := testutil.Root(t, secret)
	a := keys.Identity{InstanceID: "forest-1", Generation: "1a"}
	b := keys.Identity{InstanceID: "desert-1", Generation: "1a"}
	ca, cb := mustOrch(t, r, a), mustOrch(t, r, b)
	if ca == cb {
		t.Fatal("two instances share the orchestrator's credential")
	}
	if ca2 := mustOrch(t, r, keys.Identity{InstanceID: "forest-1", Generation: "2b"}); ca2 == ca {
		t.Fatal("a new container of the same instance kept the old credential")
	}
	if mc := mustCred(t, r, a); strings.HasSuffix(mc, strings.TrimPrefix(ca, "oc1.")) {
		t.Fatal("the map credential and the orchestrator's credential share a MAC")
	}
	if _, err := r.OrchCredential(keys.Identity{InstanceID: "forest-1", Generation: "a.b"}); err == nil {
		t.Fatal("a generation with '.' was accepted")
	}
}

func mustCred(tb testing.TB, r *keys.Root, id keys.Identity) string {
	tb.Helper()
	c, err := r.MapCredential(id)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func mustOrch(tb testing.TB, r *keys.Root, id keys.Identity) string {
	tb.Helper()
	c, err := r.OrchCredential(id)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func BenchmarkVerifyMapCredential(b *testing.B) {
	r := testutil.Root(b, secret)
	cred := mustCred(b, r, keys.Identity{InstanceID: "forest-1", Generation: keys.NewGeneration()})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.VerifyMapCredential(cred); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEdgeCredential: the edge's credential is stable for a root, differs between roots,
// reveals nothing of the root, and is told apart from the root in both directions.
func TestEdgeCredential(t *testing.T) {
	a, _ := keys.NewRoot("root-a-0123456789abcdef")
	b, _ := keys.NewRoot("root-b-0123456789abcdef")
	again, _ := keys.NewRoot("root-a-0123456789abcdef")
	ec := a.EdgeCredential()
	if ec != again.EdgeCredential() || ec == b.EdgeCredential() || strings.Contains(ec, "root-a") {
		t.Fatalf("edge credential %q", ec)
	}
	if !a.IsEdge(ec) || a.IsRoot(ec) || a.IsEdge("root-a-0123456789abcdef") || b.IsEdge(ec) {
		t.Fatal("edge credential and root confused")
	}
}
