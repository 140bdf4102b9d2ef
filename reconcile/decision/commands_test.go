package decision_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cloudnative-czs/vm-controller/backend/pods"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// noteLimit is an Event's note's limit (eventNoteLimit in package reconcile: the Events API's).
const noteLimit = 1024

// marker is where Abridge cut.
const marker = " [...] "

// TestAbridge: a message that fits is left whole; a longer one keeps its start and its end,
// the cut marked, within the limit, on a character's boundary, and no command in it is cut:
// one the end can hold is kept whole there, one it cannot is left out whole, and the start
// stops before a command it would cut.
func TestAbridge(t *testing.T) {
	prose := func(n int) string { return strings.Repeat("prose ", n/6+1)[:n] }
	long := strings.Repeat("x", 300)
	cmd := "kubectl vm restart " + long + " -n " + strings.Repeat("n", 63)
	tests := map[string]struct {
		msg        string
		keep, drop []string // whole in the note; not in it at all
	}{
		"fits":                   {msg: prose(1024), keep: []string{prose(1024)}},
		"command at the end":     {msg: prose(1500) + "; restart it: " + cmd + " (with a node autoscaler, it adds one)", keep: []string{cmd, prose(300)}},
		"command across the cut": {msg: prose(400) + " restart it: " + cmd + " (or wait); " + prose(700), keep: []string{prose(300)}, drop: []string{"kubectl"}},
		"command in the start's cut": {msg: prose(300) + " (see " + "kubectl describe pod " + long + " -n ns" + "); " + prose(900),
			keep: []string{prose(300)}, drop: []string{"kubectl"}},
		"two commands, the last fits": {msg: prose(700) + "; start it with: " + cmd + " (or kubectl annotate virtualmachine.cloudnative.czs/" + long +
			" -n ns cloudnative.czs/startRequestedAt=$(date -u +%FT%TZ) --overwrite)",
			keep: []string{"kubectl annotate virtualmachine.cloudnative.czs/" + long + " -n ns cloudnative.czs/startRequestedAt=$(date -u +%FT%TZ) --overwrite)"},
			drop: []string{"kubectl vm"}},
		"nested command and quotes": {msg: prose(900) + "; keep it: kubectl patch pv $(kubectl get pvc " + long + " -n ns -o jsonpath='{.spec.volumeName}') -p '{\"spec\":{\"x\": \"a, b; c\"}}'",
			keep: []string{"kubectl patch pv $(kubectl get pvc " + long + " -n ns -o jsonpath='{.spec.volumeName}') -p '{\"spec\":{\"x\": \"a, b; c\"}}'"}},
		"multibyte characters": {msg: strings.Repeat("é", 700), keep: []string{"éé"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := decision.Abridge(tc.msg, noteLimit)
			if len(got) > noteLimit || !utf8.ValidString(got) {
				t.Fatalf("%d bytes (valid UTF-8: %t), want at most %d: %q", len(got), utf8.ValidString(got), noteLimit, got)
			}
			if len(tc.msg) > noteLimit && !strings.Contains(got, marker) {
				t.Errorf("%q: no mark of the cut", got)
			}
			for _, k := range tc.keep {
				if !strings.Contains(got, k) {
					t.Errorf("%q\nwant it to hold %q", got, k)
				}
			}
			for _, d := range tc.drop {
				if strings.Contains(got, d) {
					t.Errorf("%q\nwant it not to hold %q", got, d)
				}
			}
		})
	}
}

// The longest names a VM can have: a name is a DNS subdomain (253 bytes), a namespace a DNS
// label (63).
var (
	longName      = "vm-" + strings.Repeat("a", 249) + "z"
	longNamespace = "ns-" + strings.Repeat("b", 59) + "z"
)

// TestLongNamesKeepCommands: every Event of every golden case, decided for a VM of the longest
// name in the longest namespace, its server and disk named as the pods backend names them,
// keeps in its note (the message as Abridge cuts it to the Events API's limit) each command
// its message gives whole, or leaves it out whole, and holds at least one: a command that
// reached the note cut mid-name acted on another object, or none. Every command a message
// gives is one the test knows (knownCommands): a new one is added there.
func TestLongNamesKeepCommands(t *testing.T) {
	known := knownCommands(longName, longNamespace)
	cut := 0
	for _, file := range caseFiles(t) {
		plan := decideLong(t, file)
		for _, e := range plan.Events {
			if !strings.Contains(e.Message, "kubectl ") {
				continue
			}
			spans := commandSpans(e.Message, known)
			if spans == nil {
				t.Errorf("%s: %s: a command the test does not know (knownCommands): %q", filepath.Base(file), e.Reason, e.Message)
				continue
			}
			note := decision.Abridge(e.Message, noteLimit)
			head, tail, ok := strings.Cut(note, marker)
			if !ok {
				head, tail = note, ""
			} else {
				cut++
			}
			h, tailAt := len(head), len(e.Message)-len(tail)
			if len(note) > noteLimit || !strings.HasPrefix(e.Message, head) || !strings.HasSuffix(e.Message, tail) {
				t.Errorf("%s: %s: note of %d bytes %q\nis not the start and the end of %q", filepath.Base(file), e.Reason, len(note), note, e.Message)
				continue
			}
			whole := 0
			for _, s := range spans {
				switch c := e.Message[s[0]:s[1]]; {
				case s[1] <= h || s[0] >= tailAt:
					whole++
				case s[0] < h || s[1] > tailAt:
					t.Errorf("%s: %s: the note %q\ncuts the command %q", filepath.Base(file), e.Reason, note, c)
				}
			}
			if whole == 0 {
				t.Errorf("%s: %s: the note %q\nholds none of the commands of %q", filepath.Base(file), e.Reason, note, e.Message)
			}
		}
	}
	if cut == 0 {
		t.Error("no note was cut: the test tests nothing")
	}
}

// decideLong decides the golden case file for the VM of the longest name (longName) in the
// longest namespace: test-vm and its namespace default renamed in the case and its base, and
// its server and disk (test-vm-server, test-vm-rootdisk) as the pods backend names them.
func decideLong(t *testing.T, file string) decision.Plan {
	t.Helper()
	rename := strings.NewReplacer("test-vm-server", pods.PodName(longName), "test-vm-rootdisk", pods.ClaimName(longName), "test-vm", longName,
		"namespace: default", "namespace: "+longNamespace, " -n default", " -n "+longNamespace)
	dir := t.TempDir()
	for _, f := range []string{file, filepath.Join(filepath.Dir(file), "base.yaml")} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), []byte(rename.Replace(string(raw))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	long := filepath.Join(dir, filepath.Base(file))
	vm, srv := decidecase.Read(t, long)
	if vm.Name() != longName || vm.Namespace() != longNamespace {
		t.Fatalf("%s: the VM is %s/%s, not the one of the longest names", file, vm.Namespace(), vm.Name())
	}
	return casePolicy(t, file).Decide(decision.Input{VM: vm, Server: srv, Gone: decidecase.Gone(t, long), Disk: decidecase.Disk(t, long),
		Budget: decidecase.Budget(t, long), Hosts: decidecase.Hosts(t, long), Now: now})
}

// knownCommands are the commands the messages give for the VM name in namespace ns, whose
// server and disk the pods backend names: each a pattern that matches all of the command.
func knownCommands(name, ns string) []*regexp.Regexp {
	q := regexp.QuoteMeta
	vm := schema.ViewOf([]byte(`{"apiVersion":"`+schema.DefaultAPIVersion+`","kind":"VirtualMachine","metadata":{"name":"`+name+`","namespace":"`+ns+`"}}`), "1", schema.Fields{})
	server, disk, node := q(pods.PodName(name)), q(pods.ClaimName(name)), `[a-z0-9.-]*[a-z0-9]`
	var known []*regexp.Regexp
	for _, verb := range []string{"start", "stop", "restart", "migrate"} {
		known = append(known, regexp.MustCompile(q(decision.PluginCommand(verb, vm, nil))))
	}
	for _, p := range []string{
		q(decision.Annotate(vm, schema.AnnotationPaused+"-")),
		q(decision.Annotate(vm, "")) + `[a-zA-Z./]+=\$\(date -u \+%FT%TZ\) --overwrite`,
		`kubectl describe pod ` + server + ` -n ` + q(ns),
		`kubectl delete pod ` + server + ` -n ` + q(ns) + ` --grace-period=0 --force`,
		`kubectl delete node ` + node,
		`kubectl delete pvc ` + disk + ` -n ` + q(ns),
		`kubectl delete -n ` + q(ns) + ` pvc/` + disk + ` pod/` + server,
		`kubectl patch pv \$\(kubectl get pvc ` + disk + ` -n ` + q(ns) + ` -o jsonpath='\{\.spec\.volumeName\}'\) -p '[^']*'`,
		`kubectl patch virtualmachine\.v1alpha1\.cloudnative\.czs/` + q(name) + ` -n ` + q(ns) + ` --type merge -p '[^']*'`,
	} {
		known = append(known, regexp.MustCompile(p))
	}
	return known
}

// commandSpans are the spans of the commands msg gives, each matched by one of known; nil
// when some "kubectl " in msg starts none of them (one inside another's, as $(kubectl get ...),
// is that one's).
func commandSpans(msg string, known []*regexp.Regexp) [][2]int {
	var spans [][2]int
	for from := 0; ; {
		i := strings.Index(msg[from:], "kubectl ")
		if i < 0 {
			return spans
		}
		at, end := from+i, -1
		for _, k := range known {
			if loc := k.FindStringIndex(msg[at:]); loc != nil && loc[0] == 0 && at+loc[1] > end {
				end = at + loc[1]
			}
		}
		if end < 0 {
			return nil
		}
		spans = append(spans, [2]int{at, end})
		from = end
	}
}

// FuzzAbridge: whatever the message, the note is within the limit, valid UTF-8 when the
// message is, and the message whole, or its start and its end around the mark of the cut.
func FuzzAbridge(f *testing.F) {
	f.Add(strings.Repeat("prose ", 200)+"; restart it: kubectl vm restart "+longName+" -n "+longNamespace, 1024)
	f.Add("kubectl "+strings.Repeat("'(", 600)+"; kubectl x", 1024)
	f.Add(strings.Repeat("é kubectl (x) ", 120), 300)
	f.Fuzz(func(t *testing.T, msg string, limit int) {
		if limit < 64 || limit > 1<<16 {
			return
		}
		note := decision.Abridge(msg, limit)
		if len(note) > limit || utf8.ValidString(msg) && !utf8.ValidString(note) {
			t.Fatalf("Abridge(%q, %d) = %q: %d bytes", msg, limit, note, len(note))
		}
		if note == msg {
			return
		}
		head, tail, ok := strings.Cut(note, marker)
		if !ok || !strings.HasPrefix(msg, head) || !strings.HasSuffix(msg, tail) {
			t.Fatalf("Abridge(%q, %d) = %q: not the start and the end of the message", msg, limit, note)
		}
	})
}

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
