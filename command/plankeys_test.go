package command

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestPlanFileKeys: the keys plan --help lists for the files of --server, --disk and --budget
// are the keys their parsers accept, as each parser's error for an unknown key lists them.
// --disk's help left out version and pinned, both accepted.
func TestPlanFileKeys(t *testing.T) {
	unknown := filepath.Join(t.TempDir(), "unknown.yaml")
	if err := os.WriteFile(unknown, []byte("unknown: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vm := filepath.Join("..", "examples", "test-vm.yaml")
	keys := regexp.MustCompile(`\(([a-zA-Z]+(?:, [a-zA-Z]+)+)[);]`)
	for _, flag := range []string{"server", "disk", "budget"} {
		t.Run(flag, func(t *testing.T) {
			var out bytes.Buffer
			a := App("")
			a.Writer, a.ErrWriter = &out, &out
			err := a.Run([]string{"vm-controller", "plan", "--now", "2026-06-01T12:00:00Z", "--" + flag, unknown, vm})
			_, msg, found := strings.Cut(errString(err), "field unknown is not a key of ")
			if !found {
				t.Fatalf("plan --%s with an unknown key: %v, want the error that lists the keys", flag, err)
			}
			accepted := keys.FindStringSubmatch(msg)
			help := keys.FindStringSubmatch(planFlagUsage(t, flag))
			if accepted == nil || help == nil || help[1] != accepted[1] {
				t.Errorf("plan --%s: --help lists the keys %v; the parser accepts %v", flag, help, accepted)
			}
		})
	}
}

// planFlagUsage is the usage of plan's flag name.
func planFlagUsage(t *testing.T, name string) string {
	t.Helper()
	for _, f := range planCommand(&planConfig{}).Flags {
		if f.Names()[0] == name {
			return f.(cli.DocGenerationFlag).GetUsage()
		}
	}
	t.Fatalf("plan has no --%s", name)
	return ""
}

// TestPlanDocFlagTable: the flag table of plan in docs/plan-and-check.md names every flag of
// plan, and none that plan does not take. It left out --budget, --stalled-after and
// --eviction-strategy.
func TestPlanDocFlagTable(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", planDoc))
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	in := false
	for _, line := range strings.Split(string(doc), "\n") {
		switch {
		case line == "| flag | default | meaning |":
			if in || named != nil {
				t.Fatalf("%s: more than one table of flags", planDoc)
			}
			in = true
		case in && strings.HasPrefix(line, "|"):
			first, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
			for _, m := range regexp.MustCompile("`--([a-z-]+)`").FindAllStringSubmatch(first, -1) {
				named = append(named, m[1])
			}
		default:
			in = false
		}
	}
	var flags []string
	for _, f := range planCommand(&planConfig{}).Flags {
		flags = append(flags, f.Names()[0])
	}
	for _, f := range flags {
		if !slices.Contains(named, f) {
			t.Errorf("%s: the table of plan's flags does not name --%s", planDoc, f)
		}
	}
	for _, n := range named {
		if !slices.Contains(flags, n) {
			t.Errorf("%s: the table of plan's flags names --%s, which plan does not take", planDoc, n)
		}
	}
}
