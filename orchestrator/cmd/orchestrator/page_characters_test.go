package main

import (
	"fmt"
	"strings"

	"github.com/chromedp/chromedp"
)

// charactersInMenu plays the menu's character list with a new key: create two
// characters, play the second one, come back to it after a reload with the same key,
// delete the first, see the refusal to delete the one still in play, and play a guest.
func charactersInMenu(p *page, key string) {
	t := p.t
	t.Helper()
	p.exec(fmt.Sprintf(`localStorage.setItem("mapyard.authKey", %q)`, key))
	p.run(chromedp.Reload())
	p.wait("the menu", `mapyardDebug.state === "menu"`)
	p.wait("an empty character list", `document.querySelectorAll("#characters li").length === 0 && mapyardDebug.menu.characters.length === 0`)

	create := func(name string, n int) {
		p.exec(fmt.Sprintf(`document.getElementById("new-name").value = %q`, name))
		p.run(chromedp.Click(chromedp.CSS("#create-button")))
		p.wait(fmt.Sprintf("%d characters listed", n), fmt.Sprintf(`document.querySelectorAll("#characters li").length === %d`, n))
	}
	create("Ada", 1)
	create("Bob", 2)
	// A bad name is refused with the server's reason, shown in the menu.
	p.exec(`document.getElementById("new-name").value = "<b>"`)
	p.run(chromedp.Click(chromedp.CSS("#create-button")))
	p.wait("the refusal of a bad name", `document.getElementById("menu-error").textContent.includes("bad_request")`)

	var ids []string
	p.eval(`[...document.querySelectorAll("#characters li")].map((li) => li.dataset.characterId)`, &ids)
	ada, bob := ids[0], ids[1]
	p.run(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#characters li[data-character-id=%q] button.pick`, bob))))
	p.wait("playing Bob", `mapyardDebug.state === "playing" && mapyardDebug.session.predicted !== null`)
	if c := p.character(); c != bob {
		t.Fatalf("picking Bob plays %s, want %s", c, bob)
	}

	// A reload with the same key: Play continues the picked (selected) character.
	p.run(chromedp.Reload())
	p.wait("the menu", `mapyardDebug.state === "menu"`)
	p.wait("both characters listed, Bob selected", fmt.Sprintf(
		`mapyardDebug.menu.characters.length === 2 && mapyardDebug.menu.characters.find((c) => c.selected).characterId === %q`, bob))
	p.run(chromedp.Click(chromedp.CSS("#play")))
	p.wait("playing", `mapyardDebug.state === "playing" && mapyardDebug.session.predicted !== null`)
	if c := p.character(); c != bob {
		t.Fatalf("after a reload Play plays %s, want Bob %s", c, bob)
	}

	// Delete asks once more; Ada goes, Bob (still in play) stays with a message.
	p.run(chromedp.Reload())
	p.wait("the menu", `mapyardDebug.state === "menu" && mapyardDebug.menu.characters.length === 2`)
	del := func(id string) {
		sel := chromedp.CSS(fmt.Sprintf(`#characters li[data-character-id=%q] button.delete`, id))
		p.run(chromedp.Click(sel))
		p.run(chromedp.Click(sel))
	}
	del(ada)
	p.wait("Ada deleted", fmt.Sprintf(`mapyardDebug.menu.characters.length === 1 && mapyardDebug.menu.characters[0].characterId === %q`, bob))
	del(bob)
	p.wait("the refusal to delete Bob in play", `document.getElementById("menu-error").textContent.includes("still in play")`)
	if n := p.count(`#characters li`); n != 1 {
		t.Fatalf("%d characters listed after the refused delete, want 1", n)
	}

	// A guest plays a disposable character, whatever the key owns.
	p.run(chromedp.Click(chromedp.CSS("#guest")))
	p.wait("playing as a guest", `mapyardDebug.state === "playing" && mapyardDebug.session.predicted !== null`)
	if c := p.character(); !strings.HasPrefix(c, "guest-") {
		t.Fatalf("a guest plays %s, want a disposable character", c)
	}
}

// count is the number of elements matching a CSS selector.
func (p *page) count(selector string) int {
	p.t.Helper()
	var n int
	p.eval(fmt.Sprintf(`document.querySelectorAll(%q).length`, selector), &n)
	return n
}
