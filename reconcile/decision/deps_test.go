package decision_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoClient holds the decision to its word that it imports no client: no package of
// client-go is among its dependencies (go list -deps), and net/http is not reached but
// through apimachinery, whose value types the decision reads (meta/v1 and runtime import it
// for their error handling; nothing of it serves or sends a request here). A failure names
// the chain of imports that brought the package in.
func TestNoClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	imports := map[string][]string{}
	var self string // go list prints the package itself last
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		self, imports[f[0]] = f[0], f[1:]
	}
	if !strings.HasSuffix(self, "/reconcile/decision") {
		t.Fatalf("go list -deps ended with %q, not the decision package", self)
	}
	// Where client-go comes in, not every package of it that follows.
	client := func(p string) bool { return p == "k8s.io/client-go" || strings.HasPrefix(p, "k8s.io/client-go/") }
	for p, chain := range reached(self, imports, client) {
		if client(p) {
			t.Errorf("the decision depends on client-go: %s", strings.Join(chain, " -> "))
		}
	}
	throughApimachinery := func(p string) bool { return strings.HasPrefix(p, "k8s.io/apimachinery/") }
	if chain, ok := reached(self, imports, throughApimachinery)["net/http"]; ok {
		t.Errorf("the decision depends on net/http, not through apimachinery: %s", strings.Join(chain, " -> "))
	}
}

// reached is every package from reaches through imports, each with the shortest chain of
// imports to it, not looking into the imports of the packages stop says to stop at.
func reached(from string, imports map[string][]string, stop func(string) bool) map[string][]string {
	chains := map[string][]string{from: {from}}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p != from && stop(p) {
			continue
		}
		for _, q := range imports[p] {
			if _, seen := chains[q]; !seen {
				chains[q] = append(append([]string(nil), chains[p]...), q)
				queue = append(queue, q)
			}
		}
	}
	return chains
}
