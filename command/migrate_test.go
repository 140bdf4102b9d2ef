package command

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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
