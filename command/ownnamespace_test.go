package command

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestManifestsRefuseTheWatchedNamespace runs manifests with the controller in the namespace
// it watches, as the one-namespace example of docs/deploying.md once did: deleting that
// namespace deleted the controller's ServiceAccount and Lease first, the controller exited
// ("lost the leader lease vms/vm-controller") before it removed its VMs' finalizers, and the
// namespace stayed Terminating. It is a bad flag combination: one line, exit code 2, and
// nothing printed to apply.
func TestManifestsRefuseTheWatchedNamespace(t *testing.T) {
	var out, errOut bytes.Buffer
	a := App("v1.0.0")
	a.Writer, a.ErrWriter = &out, &errOut
	err := a.Run([]string{"vm-controller", "manifests", "--namespace", "vms", "--watch-namespace", "vms"})
	var exit cli.ExitCoder
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("manifests: %v, want exit code 2", err)
	}
	if msg := exit.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "--namespace vm-controller --watch-namespace vms") {
		t.Errorf("manifests says %q, want one line that names a namespace of its own", msg)
	}
	if out.Len() > 0 {
		t.Errorf("manifests printed manifests:\n%s", out.String())
	}
}
