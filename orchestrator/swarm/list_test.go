package swarm_test

import (
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/supervise"
	mswarm "github.com/mapyard/mapyard/orchestrator/swarm"
)

// countingAPI is a Swarm of fixed services and tasks that counts its task lists; its
// other methods are not implemented (nil API: a call panics).
type countingAPI struct {
	mswarm.API
	services  []swarm.Service
	tasks     []swarm.Task
	taskLists int
}

var _ mswarm.API = (*countingAPI)(nil)

func (a *countingAPI) ServiceList(context.Context, swarm.ServiceListOptions) ([]swarm.Service, error) {
	return a.services, nil
}

// TaskList returns the tasks of the services its filter names, as the engine does.
func (a *countingAPI) TaskList(_ context.Context, opts swarm.TaskListOptions) ([]swarm.Task, error) {
	a.taskLists++
	var out []swarm.Task
	for _, t := range a.tasks {
		if opts.Filters.ExactMatch("service", t.ServiceID) {
			out = append(out, t)
		}
	}
	return out, nil
}

// TestRuntime_ListOneTaskList: List reads the tasks of all of the deployment's services
// in one task list and reports each service by its newest task, whatever the order the
// engine lists them in; a service with no task yet is not running, and a deployment
// with no service lists no task at all.
func TestRuntime_ListOneTaskList(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	service := func(id, runs string) swarm.Service {
		return swarm.Service{ID: id, Spec: swarm.ServiceSpec{Annotations: swarm.Annotations{Name: "mapyard-" + id,
			Labels: map[string]string{docker.LabelManaged: "true", docker.LabelDeployment: "d", mswarm.LabelRuns: runs}}}}
	}
	task := func(id, svc string, created time.Duration, st swarm.TaskState, code int, node string) swarm.Task {
		return swarm.Task{ID: id, ServiceID: svc, NodeID: node, Meta: swarm.Meta{CreatedAt: at.Add(created)},
			Status: swarm.TaskStatus{State: st, ContainerStatus: &swarm.ContainerStatus{ExitCode: code}}}
	}
	api := &countingAPI{
		services: []swarm.Service{service("s1", "a"), service("s2", "b"), service("s3", "c")},
		tasks: []swarm.Task{
			task("t1-new", "s1", 2*time.Second, swarm.TaskStateFailed, 137, "n2"),
			task("t1-old", "s1", 0, swarm.TaskStateRunning, 0, "n1"),
			task("t2-old", "s2", 0, swarm.TaskStateFailed, 1, "n1"),
			task("t2-new", "s2", time.Second, swarm.TaskStateComplete, 3, "n1"),
			task("other", "not-ours", 5*time.Second, swarm.TaskStateRunning, 0, "n1"),
		},
	}
	rt := mswarm.NewRuntime(api, mswarm.Template{Deployment: "d", Network: "maps"})
	list, err := rt.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := api.taskLists, 1; got != want {
		t.Errorf("%d task lists for %d services, want %d", got, len(api.services), want)
	}
	want := map[string]supervise.Container{
		"s1": {ID: "s1", Name: "mapyard-s1", InstanceID: "a", Exit: supervise.Exit{Code: 137}, Ports: supervise.Ports{Node: "n2"}},
		"s2": {ID: "s2", Name: "mapyard-s2", InstanceID: "b", Exit: supervise.Exit{Code: 3}, Ports: supervise.Ports{Node: "n1"}},
		"s3": {ID: "s3", Name: "mapyard-s3", InstanceID: "c", Exit: supervise.Exit{Code: -1}},
	}
	if len(list) != len(want) {
		t.Fatalf("listed %+v, want %d services", list, len(want))
	}
	for _, c := range list {
		w := want[c.ID]
		if c.ID != w.ID || c.Name != w.Name || c.InstanceID != w.InstanceID || c.Running || c.Exit != w.Exit || c.Ports != w.Ports {
			t.Errorf("listed %+v, want %+v (its newest task's state)", c, w)
		}
	}

	t.Run("NoService", func(t *testing.T) {
		empty := &countingAPI{}
		list, err := mswarm.NewRuntime(empty, mswarm.Template{Deployment: "d"}).List(context.Background())
		if err != nil || len(list) != 0 {
			t.Fatalf("listed %+v, %v; want nothing", list, err)
		}
		if got := empty.taskLists; got != 0 {
			t.Errorf("%d task lists with no service, want none (a list filtered by no service is every task)", got)
		}
	})
}
