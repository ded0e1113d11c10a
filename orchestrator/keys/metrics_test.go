package keys_test

import (
	"strings"
	"testing"

	"github.com/mapyard/mapyard/orchestrator/keys"
)

func TestMetricsCredential(t *testing.T) {
	root, err := keys.NewRoot("root-secret-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := keys.NewRoot("other-secret-0123456789")
	cred := root.MetricsCredential()
	switch {
	case !strings.HasPrefix(cred, "mt1."), strings.Contains(cred, "root-secret"):
		t.Fatalf("credential %q", cred)
	case cred != root.MetricsCredential():
		t.Fatal("credential is not stable")
	case !root.IsMetricsCredential(cred):
		t.Fatal("own credential refused")
	case root.IsRoot(cred):
		t.Fatal("the metrics credential opens the admin API")
	}
	for name, presented := range map[string]string{
		"ErrOtherRoot": other.MetricsCredential(), "ErrRootSecret": "root-secret-0123456789", "ErrEmpty": "", "ErrTruncated": cred[:len(cred)-1],
	} {
		t.Run(name, func(t *testing.T) {
			if root.IsMetricsCredential(presented) {
				t.Fatalf("%q accepted", presented)
			}
		})
	}
}
