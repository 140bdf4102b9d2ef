package access

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/crds"
)

// deployingDoc holds the RBAC tables: the controller's, then the conversion webhook's.
var deployingDoc = filepath.Join("..", "docs", "deploying.md")

// rbacRow is a row of an RBAC table of docs/deploying.md.
type rbacRow struct {
	grant string   // "group resource verb,verb", as grant writes a rule
	verbs []string // as the row lists them
	why   string
}

// rbacTables reads the tables of docs/deploying.md headed | API group | resource | verbs | why |,
// in the order of the page.
func rbacTables(t *testing.T) [][]rbacRow {
	t.Helper()
	doc, err := os.ReadFile(deployingDoc)
	if err != nil {
		t.Fatal(err)
	}
	var tables [][]rbacRow
	in := false
	for _, line := range strings.Split(string(doc), "\n") {
		switch {
		case line == "| API group | resource | verbs | why |":
			tables, in = append(tables, nil), true
		case !strings.HasPrefix(line, "|"):
			in = false
		case in && !strings.HasPrefix(line, "| ---"):
			cols := strings.Split(strings.Trim(line, "|"), " | ")
			if len(cols) < 4 {
				t.Fatalf("%s: row %q: want API group, resource, verbs, why", deployingDoc, line)
			}
			group := strings.Trim(strings.TrimSpace(cols[0]), "`")
			verbs := strings.Split(strings.TrimSpace(cols[2]), ", ")
			tables[len(tables)-1] = append(tables[len(tables)-1], rbacRow{
				grant: group + " " + strings.Trim(strings.TrimSpace(cols[1]), "`") + " " + strings.Join(verbs, ","),
				verbs: verbs,
				why:   strings.Join(cols[3:], " | "),
			})
		}
	}
	return tables
}

// grant is a rule as a row states it: "group resource verb,verb".
func grant(r Rule) string { return group(r) + " " + r.Resource + " " + strings.Join(r.Verbs, ",") }

// group is a rule's API group as the tables name it.
func group(r Rule) string {
	if r.Group == "" {
		return "core"
	}
	return r.Group
}

// TestDeployingRBACTables holds the RBAC tables of docs/deploying.md ("Exact verbs on exactly
// the resources used") to the rules the manifests grant and check verifies: a row per rule of
// a controller with every option on, verbs as granted and in that order, and none more; a
// rule of --root-disk ephemeral is in its resource's row, whose why says so; and a row per
// rule of the webhook. The table once left out pods/resize, which the manifests grant.
func TestDeployingRBACTables(t *testing.T) {
	tables := rbacTables(t)
	if len(tables) != 2 {
		t.Fatalf("%s: %d RBAC tables, want the controller's and the webhook's", deployingDoc, len(tables))
	}
	gvr := schema.GroupVersionResource{Group: "cloudnative.czs", Version: "v1alpha1", Resource: "virtualmachines"}
	every := Needs{GVR: gvr, WatchNodes: true, LeaderElect: true, WatchCRD: true, Usage: true, Disks: true}
	compareRows(t, "the controller's", tables[0], Rules(every))
	compareRows(t, "the webhook's", tables[1], WebhookRules(Webhook{Secret: "vm-controller-webhook-tls", CRD: crds.DefaultName}))

	ephemeral := every
	ephemeral.Disks = false
	for _, r := range Rules(ephemeral) {
		if slices.ContainsFunc(Rules(every), func(e Rule) bool { return grant(e) == grant(r) }) {
			continue // compared above
		}
		i := slices.IndexFunc(tables[0], func(row rbacRow) bool {
			return strings.HasPrefix(row.grant, group(r)+" "+r.Resource+" ")
		})
		if i < 0 {
			t.Errorf("%s: no row for %s, granted under --root-disk ephemeral", deployingDoc, grant(r))
			continue
		}
		for _, v := range r.Verbs {
			if !slices.Contains(tables[0][i].verbs, v) {
				t.Errorf("%s: the row %q lacks %s, granted under --root-disk ephemeral", deployingDoc, tables[0][i].grant, v)
			}
		}
		if !strings.Contains(tables[0][i].why, "--root-disk ephemeral") {
			t.Errorf("%s: the row %q does not say what --root-disk ephemeral grants (%s)", deployingDoc, tables[0][i].grant, strings.Join(r.Verbs, ", "))
		}
	}
}

// compareRows fails for every rule without its row and every row without its rule.
func compareRows(t *testing.T, table string, rows []rbacRow, rules []Rule) {
	t.Helper()
	var got, want []string
	for _, r := range rows {
		got = append(got, r.grant)
	}
	for _, r := range rules {
		want = append(want, grant(r))
	}
	for _, w := range want {
		if i := slices.Index(got, w); i >= 0 {
			got = slices.Delete(got, i, i+1)
		} else {
			t.Errorf("%s: %s RBAC table has no row %q (API group, resource, verbs), which access grants", deployingDoc, table, w)
		}
	}
	for _, g := range got {
		t.Errorf("%s: %s RBAC table has a row %q that no rule of access grants", deployingDoc, table, g)
	}
}
