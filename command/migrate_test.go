package command

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestMigrateConfigValidate(t *testing.T) {
	tests := map[string]validateCase{
		"defaults":     {},
		"resumed":      {args: []string{"--crd", "x.y", "--page-size", "1", "--continue", "abc"}},
		"json logs":    {args: []string{"--log-format", "json", "--log-level", "debug"}},
		"no CRD":       {[]string{"--crd", ""}, "--crd", "--crd is empty"},
		"page too big": {[]string{"--page-size", "10001"}, "--page-size", "--page-size 10001: want 1 to 10000"},
		"both":         {[]string{"--crd", "", "--page-size", "0"}, "--page-size", "--crd is empty\n--page-size 0: want 1 to 10000"},
		"log format":   {[]string{"--log-format", "xml"}, "--log-format", `--log-format "xml": want text or json`},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &migrateConfig{}
		parseFlags(t, migrateCommand(c), args...)
		return c.Validate()
	})
}

// TestMigrateFailedPrintsNoResult: a migration that fails (here: the cluster does not answer)
// prints the error and nothing of a result; it printed "storage version : 0 rewritten, ...
// storedVersions [] -> unchanged" first, as if something had been looked at.
func TestMigrateFailedPrintsNoResult(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing answers at its address
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q}}]\n"+
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n", srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, log bytes.Buffer
	a := App("")
	a.Writer, a.ErrWriter = &out, &log
	err := a.Run([]string{"vm-controller", "migrate", "--kubeconfig", kubeconfig})
	if err == nil || !strings.Contains(err.Error(), "read CRD virtualmachines.cloudnative.czs") {
		t.Errorf("migrate: %v, want the CRD unread", err)
	}
	if out.Len() > 0 {
		t.Errorf("a failed migration printed %q", out.String())
	}
}

// TestMigrateClientRate: migrate's client is not held to client-go's default of 5 requests a
// second, at which a pass over a few thousand VMs outlived its continue token (1,500 VMs in
// the five minutes a token lives at least). The rate is read off the configuration the
// command builds, not timed: the machines are shared.
func TestMigrateClientRate(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n"+
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := migrateConfig{}
	c.Kubeconfig = kubeconfig
	rc, err := c.apiConfig("test")
	if err != nil {
		t.Fatal(err)
	}
	if rc.QPS != migrateQPS || rc.Burst != migrateBurst {
		t.Errorf("migrate's client: qps %v, burst %d; want %d, %d", rc.QPS, rc.Burst, migrateQPS, migrateBurst)
	}
}

// TestMigratePrints runs the command against an API server holding 40 VMs: one list, one
// update each, the storedVersions trimmed, and the result printed in one line.
func TestMigratePrints(t *testing.T) {
	const n = 40
	crdPath := "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/virtualmachines.cloudnative.czs"
	crd := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"virtualmachines.cloudnative.czs","resourceVersion":"7"},` +
		`"spec":{"group":"cloudnative.czs","names":{"plural":"virtualmachines"},"versions":[{"name":"v1alpha1","served":true,"storage":false},{"name":"v1","served":true,"storage":true}]},` +
		`"status":{"storedVersions":["v1alpha1","v1"]}}`
	var items []string
	for i := range n {
		items = append(items, fmt.Sprintf(`{"apiVersion":"cloudnative.czs/v1","kind":"VirtualMachine","metadata":{"name":"vm%02d","namespace":"ns","uid":"u%02d","resourceVersion":"1"}}`, i, i))
	}
	var mu sync.Mutex
	var requests []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == crdPath:
			fmt.Fprint(w, crd)
		case r.Method == http.MethodGet && r.URL.Path == "/apis/cloudnative.czs/v1/virtualmachines":
			fmt.Fprintf(w, `{"apiVersion":"cloudnative.czs/v1","kind":"VirtualMachineList","metadata":{"resourceVersion":"9"},"items":[%s]}`, strings.Join(items, ","))
		case r.Method == http.MethodPut && (strings.HasPrefix(r.URL.Path, "/apis/cloudnative.czs/v1/namespaces/ns/virtualmachines/") || r.URL.Path == crdPath+"/status"):
			_, _ = io.Copy(w, r.Body) // written as sent
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q}}]\n"+
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n", srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, log bytes.Buffer
	a := App("")
	a.Writer, a.ErrWriter = &out, &log
	if err := a.Run([]string{"vm-controller", "migrate", "--kubeconfig", kubeconfig}); err != nil {
		t.Fatalf("migrate: %v\n%s", err, log.String())
	}
	mu.Lock()
	made := len(requests)
	mu.Unlock()
	if made != n+4 {
		t.Errorf("%d requests, want %d (the CRD read twice, a list, %d updates, the status trimmed)", made, n+4, n)
	}
	if want := "storage version v1: 40 rewritten, 0 written by others meanwhile, 0 deleted meanwhile, 0 skipped as rewritten already (listed again after a continue token expired); storedVersions [v1alpha1 v1] -> [v1]\n"; out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
}
