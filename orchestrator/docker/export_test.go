package docker

import (
	"context"

	"github.com/mapyard/mapyard/orchestrator/supervise"
)

// CreateStart is the bare create and start of a map container, without the name
// clean-up and port read-back of Start: the raw figure benchmarks compare against.
func CreateStart(ctx context.Context, r *Runtime, spec supervise.Spec) (string, error) {
	id, err := r.create(ctx, spec)
	if err != nil {
		return "", err
	}
	return id, r.start(ctx, id)
}
