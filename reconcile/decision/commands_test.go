package decision_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// TestCommandsNameTheNamespace: every kubectl command that a golden case's plan gives (in its
// status message, its conditions' and its Events') names the VM's namespace, default, but
// those of objects of no namespace (a node, a PersistentVolume): a command copied from an
// Event list of all namespaces into a shell of another namespace reaches the VM's objects, or
// none, never another namespace's of the same name.
func TestCommandsNameTheNamespace(t *testing.T) {
	clusterScoped := []string{"kubectl delete node ", "kubectl patch pv "}
	for _, file := range caseFiles(t) {
		vm, srv := decidecase.Read(t, file)
		plan := casePolicy(t, file).Decide(decision.Input{VM: vm, Server: srv, Gone: decidecase.Gone(t, file), Disk: decidecase.Disk(t, file),
			Budget: decidecase.Budget(t, file), Hosts: decidecase.Hosts(t, file), Now: now})
		var messages []string
		if plan.Status != nil {
			messages = append(messages, plan.Status.Message)
			for _, c := range plan.Status.Conditions {
				messages = append(messages, c.Message)
			}
		}
		for _, e := range plan.Events {
			messages = append(messages, e.Message)
		}
		for _, m := range messages {
			for _, cmd := range strings.Split(m, "kubectl ")[1:] {
				cmd = "kubectl " + cmd // up to the next command, or the end
				if !strings.Contains(cmd, " -n default") && !slices.ContainsFunc(clusterScoped, func(p string) bool { return strings.HasPrefix(cmd, p) }) {
					t.Errorf("%s: %q names no namespace, in %q", filepath.Base(file), cmd, m)
				}
			}
		}
	}
}
