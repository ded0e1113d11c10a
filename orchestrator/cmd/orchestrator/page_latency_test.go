package main

import (
	"context"
	"math"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// slowSocket makes every WebSocket of the page slow, in order, both ways: 75 ms each
// way (150 ms round trips), and one message in twenty held 200 ms more (a delay spike,
// as a lost and resent TCP segment would cause; what follows waits behind it).
const slowSocket = `(() => {
  const Native = WebSocket;
  // One queue per direction and socket, run by one timer at a time: strictly in order.
  const later = (ws, key, fn) => {
    const q = ws[key] || (ws[key] = { items: [], last: 0, busy: false });
    q.last = Math.max(q.last, performance.now() + 75 + (Math.random() < 0.05 ? 200 : 0));
    q.items.push([q.last, fn]);
    const pump = () => {
      if (!q.items.length) { q.busy = false; return; }
      const [at, f] = q.items[0];
      const wait = at - performance.now();
      if (wait > 0) { setTimeout(pump, wait); return; }
      q.items.shift();
      f();
      pump();
    };
    if (!q.busy) { q.busy = true; pump(); }
  };
  class Slow extends Native {
    send(data) { later(this, "_out", () => { if (this.readyState === 1) super.send(data); }); }
    set onmessage(fn) { super.onmessage = (ev) => later(this, "_in", () => fn.call(this, ev)); }
    set onclose(fn) { super.onclose = fn && ((ev) => later(this, "_in", () => fn.call(this, ev))); }
    set onopen(fn) { super.onopen = (ev) => later(this, "_in", () => fn.call(this, ev)); }
  }
  globalThis.WebSocket = Slow;
})();`

// reconcilesUnderLatency plays the page with slowSocket: walking a zig-zag, the
// prediction is never corrected by more than one step, and once every input is
// acknowledged it equals the server's position exactly.
func reconcilesUnderLatency(t *testing.T, p *page) {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	script, err := chromedp.Call(ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: slowSocket})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = chromedp.Call(p.ctx, cdppage.RemoveScriptToEvaluateOnNewDocument, cdppage.RemoveScriptToEvaluateOnNewDocumentParams{Identifier: script.Identifier})
	}()
	p.run(chromedp.Reload())
	p.wait("the menu", `mapyardDebug.state === "menu"`)
	p.run(chromedp.Click(chromedp.CSS("#play")))
	p.wait("playing", `mapyardDebug.state === "playing" && mapyardDebug.session.predicted !== null`)
	p.wait("a round trip of 150 ms or more", `mapyardDebug.session.stats.rtt >= 150`)
	for _, code := range []string{"KeyD", "KeyW", "KeyA", "KeyS", "KeyD"} {
		p.walk(code, 1.5)
	}
	p.reconciled()
	var s struct{ MaxError, RTT float64 }
	p.eval(`({maxError: mapyardDebug.session.stats.maxPredictionError, rtt: mapyardDebug.session.stats.rtt})`, &s)
	// One step of a player: 80 quanta per second at 30 ticks per second, at most
	// ⌈80/30⌉ = 3 whole quanta (the server drops at most one waiting input at a time).
	if step := math.Ceil(80.0 / 30); s.MaxError > step {
		var c any
		p.eval(`mapyardDebug.session.stats.corrections`, &c)
		t.Logf("corrections: %v", c)
		t.Fatalf("a reconciliation moved the player %.2f quanta, more than one step (%.2f)", s.MaxError, step)
	}
	t.Logf("under latency (last RTT %.0f ms): largest correction %.2f quanta", s.RTT, s.MaxError)
}
