package control

import "regexp"

// IDPattern is what map and instance ids look like. Ids become part of container names,
// log lines and URLs, so they are kept to a safe alphabet.
var IDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,47}$`)
