package main

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// refusedRejoinPlaysAgain gives the playing page a rejoin credential the orchestrator
// refuses for good (garbage, tampered with, already used), drops its connection with
// no resume token left, and checks that the page plays again as the key's character
// within 2 s: the orchestrator's refusal reaches it through the edge (at base) as it
// was answered, and the page drops the credential for a plain join at once. A plain
// join refused as well (a character the key does not own) brings the menu back with
// the server's message, from where Play plays on.
func refusedRejoinPlaysAgain(p *page, base string) {
	t := p.t
	t.Helper()
	character := p.character()
	held := func() string {
		var cred string
		p.eval(`mapyardDebug.session.rejoinCred`, &cred)
		if cred == "" {
			t.Fatal("the playing page holds no rejoin credential")
		}
		return cred
	}
	// drop closes the page's connection with cred as its rejoin credential and no
	// resume token, as a map crash past the resume window leaves it.
	drop := func(cred, joinExtra string) {
		p.exec(fmt.Sprintf(`mapyardDebug.states.length = 0;
			const s = mapyardDebug.session;
			s.rejoinCred = %q;
			if (%q) s.identity.joinExtra = JSON.parse(%q);
			s.resume = null;
			globalThis.droppedAt = performance.timeOrigin + performance.now();
			s.ws.close()`, cred, joinExtra, joinExtra))
	}
	for _, tc := range []struct {
		name, code string
		cred       func() string
	}{
		{"Garbage", "ticket_invalid", func() string { return "garbage" }},
		{"Tampered", "ticket_invalid", func() string {
			c, last := held(), "A" // its signature's last character changed
			if strings.HasSuffix(c, last) {
				last = "B"
			}
			return c[:len(c)-1] + last
		}},
		{"Used", "ticket_used", func() string {
			c := held()
			testutil.PostJSON(t, base+public.PathJoin, "", public.JoinRequest{Rejoin: c}, http.StatusOK, nil)
			return c
		}},
	} {
		drop(tc.cred(), "")
		p.waitWithin(tc.name+": playing again", 10*time.Second,
			`mapyardDebug.state === "playing" && mapyardDebug.states.includes("reconnecting") && mapyardDebug.session.predicted !== null`)
		var got struct {
			Character        string
			WelcomedAt, Gone float64
			Log              string
		}
		p.eval(`(({session: s}) => ({character: s.welcome.characterId, welcomedAt: s.stats.welcomedAt, gone: globalThis.droppedAt,
			log: document.getElementById("log").textContent}))(mapyardDebug)`, &got)
		took := time.Duration((got.WelcomedAt - got.Gone) * float64(time.Millisecond))
		t.Logf("%s rejoin credential: playing again %s after the connection dropped", tc.name, took.Round(time.Millisecond))
		if got.Character != character {
			t.Fatalf("%s: playing %s after the refused rejoin, want the key's %s", tc.name, got.Character, character)
		}
		if !strings.Contains(got.Log, "rejoin refused: "+tc.code) {
			t.Fatalf("%s: the log says %q, want the refusal %s", tc.name, got.Log, tc.code)
		}
		if took > 2*time.Second {
			t.Errorf("%s: playing again %s after the connection dropped, want 2 s at most", tc.name, took)
		}
	}

	drop("garbage", `{"characterId":"not-this-keys"}`)
	p.waitWithin("the menu with the server's refusal", 10*time.Second,
		`mapyardDebug.state === "menu" && !document.getElementById("menu").hidden &&
		 document.getElementById("menu-error").textContent.includes("forbidden")`)
	p.run(chromedp.Click(chromedp.CSS("#play")))
	p.wait("playing from the menu", `mapyardDebug.state === "playing" && mapyardDebug.session.predicted !== null`)
	if c := p.character(); c != character {
		t.Fatalf("Play after the refusal plays %s, want %s", c, character)
	}
}
