package envconf

import (
	"fmt"
	"io"
)

// Validator is a configuration that checks values that parse but make no sense.
type Validator interface {
	Validate() error
}

// Command is what both mapyard binaries do before they run: answer -h with every
// variable, load and validate the environment, and run the image's healthcheck
// subcommand.
type Command struct {
	Name        string       // binary name, e.g. "orchestrator"
	Title       string       // first line of the help, e.g. "mapyard orchestrator v1.2"
	Note        string       // printed after the variables in the help
	Healthcheck func() error // runs after the configuration is loaded
}

// Prepare loads cfg (a pointer to a struct with env tags) from environ and handles args.
// It returns done=true with the exit code when the process should stop: after the help,
// on invalid configuration (2, the message naming the variable), after a healthcheck
// (0 healthy, 1 not), or on an unknown command (2).
func (c Command) Prepare(cfg Validator, args, environ []string, stdout, stderr io.Writer) (code int, done bool) {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintf(stdout, "%s\n\nUsage: %s [healthcheck]\n\nEnvironment:\n", c.Title, c.Name)
		Usage(stdout, cfg)
		if c.Note != "" {
			fmt.Fprintf(stdout, "\n%s\n", c.Note)
		}
		return 0, true
	}
	if err := Load(cfg, environ); err != nil {
		fmt.Fprintf(stderr, "%s: invalid configuration: %v\n", c.Name, err)
		return 2, true
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "%s: invalid configuration: %v\n", c.Name, err)
		return 2, true
	}
	switch {
	case len(args) == 0:
		return 0, false
	case args[0] == "healthcheck" && c.Healthcheck != nil:
		if err := c.Healthcheck(); err != nil {
			fmt.Fprintf(stderr, "unhealthy: %v\n", err)
			return 1, true
		}
		return 0, true
	default:
		fmt.Fprintf(stderr, "%s: unknown command %q (try -h)\n", c.Name, args[0])
		return 2, true
	}
}
