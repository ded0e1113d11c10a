package testutil

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator"
)

// NewAuthKey returns a fresh random authKey as a browser would make one: 32 URL-safe
// characters.
func NewAuthKey(tb testing.TB) string {
	tb.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// CharacterAPI calls the join and the character API at Base: the orchestrator's public
// listener, its control listener (then Secret goes in the secret header, as the edge
// sends it) or the edge.
type CharacterAPI struct {
	Base, Secret string
}

// Do sends one call with authKey as the bearer ("" sends no Authorization header) and
// fails the test unless the answer has wantStatus; see testutil.Do.
func (a CharacterAPI) Do(tb testing.TB, method, path, authKey string, body any, wantStatus int, out any) []byte {
	tb.Helper()
	h := http.Header{}
	if a.Secret != "" {
		h.Set(httpkit.SecretHeader, a.Secret)
	}
	if authKey != "" {
		h.Set("Authorization", "Bearer "+authKey)
	}
	return DoWith(tb, method, a.Base+path, h, body, wantStatus, out)
}

// List returns the characters of authKey.
func (a CharacterAPI) List(tb testing.TB, authKey string) []orchestrator.CharacterSummary {
	tb.Helper()
	var l struct {
		Characters []orchestrator.CharacterSummary
	}
	a.Do(tb, http.MethodGet, public.PathCharacters, authKey, nil, http.StatusOK, &l)
	return l.Characters
}

// Create creates a character named name for authKey.
func (a CharacterAPI) Create(tb testing.TB, authKey, name string) orchestrator.CharacterSummary {
	tb.Helper()
	var c orchestrator.CharacterSummary
	a.Do(tb, http.MethodPost, public.PathCharacters, authKey, map[string]string{"name": name}, http.StatusCreated, &c)
	if c.CharacterID == "" || c.Name != strings.TrimSpace(name) {
		tb.Fatalf("created %+v for name %q", c, name)
	}
	return c
}

// Join joins with r and fails unless the answer is 200.
func (a CharacterAPI) Join(tb testing.TB, r public.JoinRequest) public.JoinResponse {
	tb.Helper()
	var j public.JoinResponse
	a.Do(tb, http.MethodPost, public.PathJoin, "", r, http.StatusOK, &j)
	return j
}

// WantError sends one call and fails unless it is answered with the status of code and
// the code itself, and a message that does not repeat authKey; it returns the message.
func (a CharacterAPI) WantError(tb testing.TB, method, path, authKey string, body any, code string) string {
	tb.Helper()
	var e httpkit.ErrorResponse
	raw := a.Do(tb, method, path, authKey, body, apierr.Status(code), &e)
	if e.Error.Code != code || e.Error.Message == "" {
		tb.Fatalf("%s %s: %s, want code %s with a message", method, path, raw, code)
	}
	if authKey != "" && strings.Contains(string(raw), authKey) {
		tb.Fatalf("%s %s: the answer repeats the authKey", method, path)
	}
	return e.Error.Message
}

// CharacterFlows runs the character API's contract against api: two characters
// created, listed, the second selected and entered by a join (enter connects the
// player to the map the join answer names and returns the character the map admitted),
// a duplicate name, bad names, the cap of max characters, a delete refused while the
// character is in play and allowed for the other, and another identity that can neither
// see, select, delete nor join them. It returns the authKeys it used.
func CharacterFlows(t *testing.T, api CharacterAPI, max int, enter func(*testing.T, public.JoinResponse) string) (keys []string) {
	t.Helper()
	key, other := NewAuthKey(t), NewAuthKey(t)
	var ada, bob orchestrator.CharacterSummary
	t.Run("CreateTwoListSelectSecondJoinEntersIt", func(t *testing.T) {
		if l := api.List(t, key); len(l) != 0 {
			t.Fatalf("a new identity lists %+v", l)
		}
		ada = api.Create(t, key, "Ada")
		bob = api.Create(t, key, " Bob ")
		if !ada.Selected || bob.Selected {
			t.Fatalf("created %+v then %+v: the first is selected", ada, bob)
		}
		l := api.List(t, key)
		if len(l) != 2 || l[0].CharacterID != ada.CharacterID || l[1].CharacterID != bob.CharacterID || !l[0].Selected || l[1].Selected ||
			l[0].CreatedAtMs == 0 {
			t.Fatalf("list %+v", l)
		}
		api.Do(t, http.MethodPost, public.PathCharacters+"/"+bob.CharacterID+"/select", key, nil, http.StatusOK, nil)
		if l = api.List(t, key); l[0].Selected || !l[1].Selected {
			t.Fatalf("after selecting Bob: %+v", l)
		}
		j := api.Join(t, public.JoinRequest{AuthKey: key})
		if j.CharacterID != bob.CharacterID || j.Disposable {
			t.Fatalf("join entered %s, want the selected %s", j.CharacterID, bob.CharacterID)
		}
		if got := enter(t, j); got != bob.CharacterID {
			t.Fatalf("the map admitted %s, want %s", got, bob.CharacterID)
		}
		// Naming a character enters it, whatever is selected.
		if j = api.Join(t, public.JoinRequest{AuthKey: key, CharacterID: ada.CharacterID}); j.CharacterID != ada.CharacterID {
			t.Fatalf("join naming Ada entered %s", j.CharacterID)
		}
	})
	t.Run("ErrBadRequestDuplicateName", func(t *testing.T) {
		msg := api.WantError(t, http.MethodPost, public.PathCharacters, key, map[string]string{"name": "BOB"}, apierr.EBADREQUEST)
		if !strings.Contains(msg, "already") {
			t.Fatalf("duplicate name: %q does not say why", msg)
		}
	})
	t.Run("ErrBadRequestNames", func(t *testing.T) {
		seen := map[string]bool{}
		// A name of 8 KiB is too long a name, not too large a body.
		for _, name := range []string{"", "   ", strings.Repeat("n", orchestrator.MaxCharacterNameLen+1), strings.Repeat("n", 8<<10), "bad\x00name", "<script>", "-dash", "two  spaces"} {
			msg := api.WantError(t, http.MethodPost, public.PathCharacters, key, map[string]string{"name": name}, apierr.EBADREQUEST)
			seen[msg] = true
		}
		if len(seen) < 5 {
			t.Fatalf("bad names got %d different reasons, want one per rule: %v", len(seen), seen)
		}
		api.WantError(t, http.MethodPost, public.PathCharacters, key, `{"name":"x","extra":1}`, apierr.EBADREQUEST)
	})
	t.Run("ErrTooLarge", func(t *testing.T) {
		body := `{"name":"` + strings.Repeat("n", public.MaxPlayerBody) + `"}`
		api.WantError(t, http.MethodPost, public.PathCharacters, key, body, apierr.ETOOLARGE)
		api.WantError(t, http.MethodPost, public.PathJoin, "", body, apierr.ETOOLARGE)
	})
	t.Run("ErrCharacterLimit", func(t *testing.T) {
		for i := len(api.List(t, key)); i < max; i++ {
			api.Create(t, key, fmt.Sprintf("Extra %d", i))
		}
		api.WantError(t, http.MethodPost, public.PathCharacters, key, map[string]string{"name": "One Too Many"}, apierr.ECHARACTERLIMIT)
	})
	t.Run("ErrCharacterInPlay", func(t *testing.T) {
		api.WantError(t, http.MethodDelete, public.PathCharacters+"/"+bob.CharacterID, key, nil, apierr.ECHARACTERINPLAY)
		if l := api.List(t, key); len(l) != max {
			t.Fatalf("after a refused delete: %d characters, want %d", len(l), max)
		}
		api.Do(t, http.MethodDelete, public.PathCharacters+"/"+ada.CharacterID, key, nil, http.StatusNoContent, nil)
		for _, c := range api.List(t, key) {
			if c.CharacterID == ada.CharacterID {
				t.Fatal("Ada is still listed after her delete")
			}
		}
		api.WantError(t, http.MethodDelete, public.PathCharacters+"/"+ada.CharacterID, key, nil, apierr.ENOTFOUND)
	})
	t.Run("ErrOthersCharacter", func(t *testing.T) {
		if l := api.List(t, other); len(l) != 0 {
			t.Fatalf("another identity lists %+v", l)
		}
		// A character of someone else and one that never existed get the same answers.
		var msgs []string
		for _, id := range []string{bob.CharacterID, "0123456789abcdef0123456789abcdef"} {
			msgs = append(msgs,
				api.WantError(t, http.MethodPost, public.PathCharacters+"/"+id+"/select", other, nil, apierr.ENOTFOUND),
				api.WantError(t, http.MethodDelete, public.PathCharacters+"/"+id, other, nil, apierr.ENOTFOUND),
				api.WantError(t, http.MethodPost, public.PathJoin, "", public.JoinRequest{AuthKey: other, CharacterID: id}, apierr.EFORBIDDEN))
		}
		for i := 0; i < 3; i++ {
			if msgs[i] != msgs[i+3] {
				t.Fatalf("someone else's character answered %q, a missing one %q", msgs[i], msgs[i+3])
			}
		}
		if l := api.List(t, key); len(l) != max-1 {
			t.Fatalf("the owner's list changed: %+v", l)
		}
	})
	t.Run("ErrUnauthorized", func(t *testing.T) {
		for _, k := range []string{"", "short", strings.Repeat("x", 20) + "!!"} {
			api.WantError(t, http.MethodGet, public.PathCharacters, k, nil, apierr.EUNAUTHORIZED)
			api.WantError(t, http.MethodPost, public.PathCharacters, k, map[string]string{"name": "Eve"}, apierr.EUNAUTHORIZED)
			api.WantError(t, http.MethodDelete, public.PathCharacters+"/"+bob.CharacterID, k, nil, apierr.EUNAUTHORIZED)
		}
	})
	return []string{key, other}
}
