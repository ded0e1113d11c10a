package ticket_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/orchestrator/ticket"
)

const secret = "host-secret-0123456789abcdef"

var t0 = time.UnixMilli(1_800_000_000_000)

func claims() ticket.Claims {
	return ticket.Claims{
		Kind: ticket.KindTransfer, ID: ticket.NewID(12), Subject: "c2Vzc2lvbi1zdWJqZWN0", CharacterID: "ch-1",
		From: "default-1", To: "frontier-1", IssuedAtMs: t0.UnixMilli(), ExpiresAtMs: t0.Add(10 * time.Second).UnixMilli(),
		Nonce: ticket.NewID(16),
	}
}

func MustMint(tb testing.TB, s *ticket.Signer, c ticket.Claims) string {
	tb.Helper()
	tok, err := s.Mint(c)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

func TestVerify(t *testing.T) {
	s := ticket.NewSigner([]byte(secret))
	c := claims()
	tok := MustMint(t, s, c)

	t.Run("OK", func(t *testing.T) {
		got, err := s.Verify(tok, t0.Add(9*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if got != c {
			t.Fatalf("claims %+v, want %+v", got, c)
		}
	})
	t.Run("ErrTicketExpired", func(t *testing.T) {
		_, err := s.Verify(tok, t0.Add(10*time.Second))
		if got := apierr.Code(err); got != apierr.ETICKETEXPIRED {
			t.Fatalf("code %q, want ticket_expired", got)
		}
	})
	invalid := map[string]string{
		"Forged":        MustMint(t, ticket.NewSigner([]byte("another-host-secret-000000")), c),
		"Truncated":     tok[:len(tok)-1],
		"TruncatedBody": tok[:20],
		"Empty":         "",
		"NoPrefix":      strings.TrimPrefix(tok, "mt1."),
		"TooLong":       tok + strings.Repeat("a", ticket.MaxLen),
		"Junk":          "mt1.j.x.y",
	}
	// Tamper with every claim byte by byte: each change must break the signature.
	body := tok[:strings.LastIndexByte(tok, '.')]
	for i := len("mt1."); i < len(body); i++ {
		b := []byte(tok)
		if b[i] == '.' {
			continue
		}
		b[i] ^= 0x01
		invalid["Tampered"+string(rune('A'+i%26))+strings.Repeat("_", i/26)] = string(b)
	}
	// Move the target: a valid token for map A does not become one for map B.
	invalid["RetargetedTo"] = strings.Replace(tok, ".frontier-1.", ".frontier-2.", 1)
	for name, bad := range invalid {
		t.Run("ErrTicketInvalid/"+name, func(t *testing.T) {
			_, err := s.Verify(bad, t0)
			if got := apierr.Code(err); got != apierr.ETICKETINVALID {
				t.Fatalf("code %q (%v), want ticket_invalid", got, err)
			}
		})
	}
}

func TestMint_Refuses(t *testing.T) {
	s := ticket.NewSigner([]byte(secret))
	for name, mut := range map[string]func(*ticket.Claims){
		"EmptyTo":     func(c *ticket.Claims) { c.To = "" },
		"DotInID":     func(c *ticket.Claims) { c.ID = "a.b" },
		"UnknownKind": func(c *ticket.Claims) { c.Kind = 'x' },
	} {
		t.Run(name, func(t *testing.T) {
			c := claims()
			mut(&c)
			if _, err := s.Mint(c); apierr.Code(err) != apierr.EBADREQUEST {
				t.Fatalf("Mint()=%v, want bad_request", err)
			}
		})
	}
}

func TestKeyHasher(t *testing.T) {
	k := ticket.NewKeyHasher([]byte(secret))
	key := "AbCdEfGhIjKlMnOpQrStUv_-0123"
	h1, err := k.Hash(key)
	if err != nil {
		t.Fatal(err)
	}
	if h2, _ := k.Hash(key); h1 != h2 {
		t.Fatal("hash is not stable")
	}
	if h3, _ := ticket.NewKeyHasher([]byte("other-secret-000000000000")).Hash(key); h3 == h1 {
		t.Fatal("hash does not depend on the host secret")
	}
	if strings.Contains(h1, key) {
		t.Fatal("hash contains the key")
	}
	for name, bad := range map[string]string{
		"TooShort": "abc", "TooLong": strings.Repeat("a", 129), "NotURLSafe": "abcdefghijklmnopqrstuvw+/=",
		"Space": "abcdefghijklmnopqrstuv wxyz",
	} {
		t.Run("ErrBadRequest/"+name, func(t *testing.T) {
			_, err := k.Hash(bad)
			if apierr.Code(err) != apierr.EBADREQUEST {
				t.Fatalf("err=%v, want bad_request", err)
			}
			if len(bad) > 3 && strings.Contains(err.Error(), bad) {
				t.Fatalf("error repeats the raw key: %v", err)
			}
		})
	}
}

func FuzzVerify(f *testing.F) {
	s := ticket.NewSigner([]byte(secret))
	tok := MustMint(f, s, claims())
	f.Add(tok)
	f.Add(tok[:len(tok)-5])
	f.Add("mt1.j.a.b.c.d.e.1.2.n." + strings.Repeat("A", 43))
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		c, err := s.Verify(in, t0)
		if err == nil {
			// Only a token this signer minted verifies; re-minting its claims must give it back.
			if again, merr := s.Mint(c); merr != nil || again != in {
				t.Fatalf("verified a token that does not re-mint to itself: %q", in)
			}
			return
		}
		switch apierr.Code(err) {
		case apierr.ETICKETINVALID, apierr.ETICKETEXPIRED:
		default:
			t.Fatalf("unstructured error %v", err)
		}
	})
}

func BenchmarkMint(b *testing.B) {
	s := ticket.NewSigner([]byte(secret))
	c := claims()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Mint(c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	s := ticket.NewSigner([]byte(secret))
	tok := MustMint(b, s, claims())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Verify(tok, t0); err != nil {
			b.Fatal(err)
		}
	}
}
