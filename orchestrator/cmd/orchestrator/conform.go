package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/mapyard/mapyard/orchestrator/conform"
)

// conformUsage heads `orchestrator conform -h`.
const conformUsage = `Usage: orchestrator conform --image IMAGE [-json] [-v]

Checks that a map image obeys the map contract (docs/map-contract.md, "Conformance"):
starts it on a throwaway deployment of the local Docker engine, plays the orchestrator
against it and prints one line per check (PASS name, or FAIL name: why), then
"N passed, M failed". Exit status: 0 when every check passed, 1 when one failed,
2 when the run could not start (no engine, no such image, bad flags).

`

// runConform is `orchestrator conform`: it parses the flags and prints the report of
// conform.Run, which does the work.
func runConform(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("orchestrator conform", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, conformUsage)
		fs.PrintDefaults()
	}
	image := fs.String("image", "", "the map `image` to check, as docker run names it (required)")
	asJSON := fs.Bool("json", false, "print the report as one JSON document instead of one line per check")
	verbose := fs.Bool("v", false, "log the in-process orchestrator's own lines to stderr")
	network := fs.String("network", conform.DefaultNetwork, "the map network (ORCH_MAP_NETWORK)")
	grace := fs.Duration("stop-grace", conform.DefaultStopGrace, "SIGTERM to SIGKILL (ORCH_MAP_STOP_GRACE_MS)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *image == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	opts := conform.Options{Image: *image, Network: *network, StopGrace: *grace}
	if *verbose {
		opts.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var onResult func(conform.Result)
	if !*asJSON {
		onResult = func(r conform.Result) { fmt.Fprintln(stdout, r.Line()) }
	}
	rep, err := conform.Run(ctx, opts, onResult)
	if err != nil {
		fmt.Fprintf(stderr, "orchestrator conform: %v\n", err)
		return 2
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return 2
		}
	} else {
		fmt.Fprintln(stdout, rep.Summary())
	}
	if !rep.OK() {
		return 1
	}
	return 0
}
