package orchestrator

import (
	"time"

	"github.com/mapyard/mapyard/orchestrator/control"
)

// Item is one inventory row: a stack of one item kind held by one owner.
type Item struct {
	ItemID    string            `json:"itemId"`
	ItemKind  string            `json:"itemKind"`
	Owner     control.ItemOwner `json:"owner"`
	Quantity  int64             `json:"quantity"`
	UpdatedAt time.Time         `json:"updatedAt"`
}

// Character is a persistent character, known by the keyed hash of its authKey. The raw
// authKey is never stored.
type Character struct {
	ID        string    `json:"id"`
	KeyHash   string    `json:"-"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}
