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
