package orchestrator

import (
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// Snapshot is the latest accepted state of one partition of one map instance.
type Snapshot struct {
	InstanceID string                  `json:"instanceId"`
	Partition  string                  `json:"partition"`
	Revision   int64                   `json:"revision"`
	Envelope   record.SnapshotEnvelope `json:"envelope"`
}
