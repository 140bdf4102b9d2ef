package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cloudnative-czs/vm-controller/internal/golden"

	"golang.org/x/tools/txtar"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"gopkg.in/yaml.v3"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// now is the clock of every golden case; times in the inputs are written relative to it.
var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// TestDecideGolden feeds each testdata/decide/<case>.txtar (a VM as a patch of the shared
// base.yaml, and optionally the server the backend observed) to Decide and compares the plan, as YAML, with <case>.golden. It then
// applies the plan to an in-memory world and decides again: a correct decision leaves nothing
// more to do.
func TestDecideGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "decide", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden cases found: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		t.Run(name, func(t *testing.T) {
			vm, srv := readCase(t, file)
			policy := casePolicy(t, file)
			plan := policy.Decide(vm, srv, now)
			got := renderPlan(t, plan)
			if again := renderPlan(t, policy.Decide(vm, srv, now)); again != got {
				t.Fatalf("Decide is not deterministic:\n%s\nthen\n%s", got, again)
			}
			golden.Check(t, strings.TrimSuffix(file, ".txtar")+".golden", []byte(got))

			vm2, srv2, gone := applyPlan(t, vm, srv, plan)
			if gone {
				return
			}
			if next := policy.Decide(vm2, srv2, now); !next.Empty() {
				t.Errorf("deciding again after applying the plan asks for more:\n%s", renderPlan(t, next))
			}
		})
	}
}

func readCase(t *testing.T, file string) (schema.VirtualMachine, *backend.Server) {
	t.Helper()
	raw, server := caseInput(t, file)
	fields, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: "v1alpha1"})
	if err != nil {
		t.Fatal(err)
	}
	vm, err := schema.Parse(raw, fields)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var srv *backend.Server
	if server != nil {
		// The plan command reads --server with the same code.
		if srv, err = memory.ParseServer(server, now); err != nil {
			t.Fatalf("%s: server.yaml: %v", file, err)
		}
	}
	return vm, srv
}

// caseInput reads a case of testdata/decide: its VM as JSON, which is testdata/decide/base.yaml
// with the case's vm.patch.yaml (a JSON merge patch, RFC 7386) applied, or the case's whole
// vm.yaml where a merge patch cannot say it (an explicit null); and its server.yaml, nil when
// the case has no server. A key written twice in one mapping fails the case: converted to JSON
// the YAML would keep only the last, and the case would silently test something else.
func caseInput(tb testing.TB, file string) (vm, server []byte) {
	tb.Helper()
	ar, err := txtar.ParseFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range ar.Files {
		switch f.Name {
		case "vm.yaml":
			if vm, err = sigsyaml.YAMLToJSONStrict(f.Data); err != nil {
				tb.Fatalf("%s: vm.yaml: %v", file, err)
			}
		case "vm.patch.yaml":
			base, err := os.ReadFile(filepath.Join(filepath.Dir(file), "base.yaml"))
			if err != nil {
				tb.Fatal(err)
			}
			if vm, err = sigsyaml.YAMLToJSONStrict(base); err != nil {
				tb.Fatalf("base.yaml: %v", err)
			}
			patch, err := sigsyaml.YAMLToJSONStrict(f.Data)
			if err != nil {
				tb.Fatalf("%s: vm.patch.yaml: %v", file, err)
			}
			if vm, err = jsonpatch.MergePatch(vm, patch); err != nil {
				tb.Fatalf("%s: vm.patch.yaml: %v", file, err)
			}
		case "server.yaml":
			server = f.Data
		case "policy.yaml": // casePolicy's
		default:
			tb.Fatalf("%s: unknown section %q", file, f.Name)
		}
	}
	if vm == nil {
		tb.Fatalf("%s: no vm.yaml or vm.patch.yaml", file)
	}
	return vm, server
}

// casePolicy is DefaultPolicy with the settings of the case's policy.yaml, if it has one:
//
//	resize: manual     # --resize
//	canResize: false   # a backend that cannot resize in place
func casePolicy(t testing.TB, file string) Policy {
	t.Helper()
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p := DefaultPolicy
	for _, f := range ar.Files {
		if f.Name != "policy.yaml" {
			continue
		}
		var in struct {
			Resize    ResizeMode `yaml:"resize"`
			CanResize *bool      `yaml:"canResize"`
		}
		dec := yaml.NewDecoder(bytes.NewReader(f.Data))
		dec.KnownFields(true)
		if err := dec.Decode(&in); err != nil {
			t.Fatalf("%s: policy.yaml: %v", file, err)
		}
		if in.Resize != "" {
			p.Resize = in.Resize
		}
		if in.CanResize != nil {
			p.CanResize = *in.CanResize
		}
	}
	return p
}

func renderPlan(t *testing.T, p Plan) string {
	t.Helper()
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(p); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// applyPlan carries out a plan on a copy of the world the way the controller would: the
// finalizer change and the status as patches on the VM's JSON, the server action on an
// in-memory backend. gone reports that the VM was released for deletion.
func applyPlan(t *testing.T, vm schema.VirtualMachine, srv *backend.Server, p Plan) (schema.VirtualMachine, *backend.Server, bool) {
	t.Helper()
	raw := vm.JSON()
	servers, owner := memory.New(), ownerOf(vm)
	if srv != nil {
		servers.Set(owner, srv)
	}
	// A resize is taken and left pending, where the plan's status says it is.
	servers.AnswerResizes(memory.ResizeAnswer{State: backend.ResizePending})
	if p.Server != nil {
		switch p.Server.Op {
		case CreateServer:
			if srv != nil {
				t.Fatalf("plan creates a server while one exists")
			}
			created, err := servers.Create(context.Background(), owner, *p.Server.Spec)
			if err != nil {
				t.Fatal(err)
			}
			p.Created(created)
		case DeleteServer:
			if srv == nil {
				t.Fatalf("plan deletes a server that does not exist")
			}
			if err := servers.Delete(context.Background(), owner); err != nil {
				t.Fatal(err)
			}
		case ResizeServer:
			if _, err := servers.Resize(context.Background(), owner, *p.Server.Spec); err != nil {
				t.Fatal(err)
			}
		}
	}
	srv, err := servers.Observe(owner)
	if err != nil {
		t.Fatal(err)
	}
	if p.Finalizer != "" {
		fins := []string{}
		for _, f := range vm.Finalizers() {
			if f != schema.Finalizer {
				fins = append(fins, f)
			}
		}
		if p.Finalizer == AddFinalizer {
			if vm.HasFinalizer(schema.Finalizer) {
				t.Fatalf("plan adds a finalizer the VM has")
			}
			fins = append(fins, schema.Finalizer)
		} else if !vm.HasFinalizer(schema.Finalizer) {
			t.Fatalf("plan removes a finalizer the VM lacks")
		}
		raw = mergePatch(t, raw, map[string]any{"metadata": map[string]any{"finalizers": fins}})
		if p.Finalizer == RemoveFinalizer && vm.Deleting() {
			return vm, srv, true
		}
	}
	if p.Status != nil {
		patch, err := schema.StatusPatch(vm.Fields(), *p.Status, "")
		if err != nil {
			t.Fatal(err)
		}
		if raw, err = jsonpatch.MergePatch(raw, patch); err != nil {
			t.Fatal(err)
		}
	}
	next, err := schema.Parse(raw, vm.Fields())
	if err != nil {
		t.Fatal(err)
	}
	return next, srv, false
}

func mergePatch(t *testing.T, raw []byte, patch map[string]any) []byte {
	t.Helper()
	p, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jsonpatch.MergePatch(raw, p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fatalTB records the first Fatal of a helper run under it and ends the goroutine there, as
// testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestCaseInputDuplicateKey: a case whose VM writes a key twice is refused, so that no case
// tests the last of two blocks while its author meant both.
func TestCaseInputDuplicateKey(t *testing.T) {
	dir := t.TempDir()
	base, err := os.ReadFile(filepath.Join("..", "testdata", "decide", "base.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "base.yaml"), base, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		section, body, want string
	}{
		"patch, duplicate": {"vm.patch.yaml", "metadata:\n  generation: 2\nmetadata:\n  labels: {a: b}\n", `key "metadata" already set`},
		"whole, duplicate": {"vm.yaml", string(base) + "spec:\n  action: inactive\n", `key "spec" already set`},
		"patch, one block": {"vm.patch.yaml", "metadata:\n  generation: 2\n  labels: {a: b}\n", ""},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(name, ", ", "-")+".txtar")
			ar := &txtar.Archive{Files: []txtar.File{{Name: tc.section, Data: []byte(tc.body)}}}
			if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
				t.Fatal(err)
			}
			tb := &fatalTB{TB: t}
			var vm []byte
			done := make(chan struct{})
			go func() {
				defer close(done)
				vm, _ = caseInput(tb, file)
			}()
			<-done
			switch {
			case tc.want == "" && tb.msg != "":
				t.Fatalf("caseInput failed: %s", tb.msg)
			case tc.want == "" && !strings.Contains(string(vm), `"generation":2`):
				t.Fatalf("the patch was not applied: %s", vm)
			case tc.want != "" && !strings.Contains(tb.msg, tc.want):
				t.Fatalf("caseInput failed with %q, want it to name %q (vm: %s)", tb.msg, tc.want, vm)
			}
		})
	}
}

// TestRefusalThroughNodeLost: a resize refused under --resize in-place, met under manual
// while the server's node does not answer, and decided again once it answers. The refusal
// stays on record through both decisions, and RestartRequired names the refusal's cause, not
// the node's state when it was first written.
func TestRefusalThroughNodeLost(t *testing.T) {
	file := filepath.Join("..", "testdata", "decide", "resize-refused-then-manual-lost.txtar")
	vm, srv := readCase(t, file)
	policy := casePolicy(t, file)
	if srv.State != backend.StateLost {
		t.Fatalf("%s: server is %s, want Lost", file, srv.State)
	}
	refusal := vm.Status().Condition(schema.ConditionResizing)
	if refusal == nil || refusal.Reason != ReasonResizeInfeasible {
		t.Fatalf("%s: no refusal on record: %+v", file, refusal)
	}
	vm, srv, _ = applyPlan(t, vm, srv, policy.Decide(vm, srv, now))

	back := *srv
	back.State, back.Message = backend.StateReady, ""
	plan := policy.Decide(vm, &back, now.Add(time.Minute))
	if plan.Server != nil {
		t.Fatalf("the refused resize is asked for again: %+v", plan.Server)
	}
	vm, _, _ = applyPlan(t, vm, &back, plan)

	st := vm.Status()
	if st.Phase != schema.PhaseActive {
		t.Errorf("phase %s, want %s", st.Phase, schema.PhaseActive)
	}
	c := st.Condition(schema.ConditionRestartRequired)
	switch {
	case c == nil:
		t.Fatalf("no RestartRequired: %+v", st.Conditions)
	case c.Reason != ReasonResizeInfeasible:
		t.Errorf("RestartRequired reason %s, want %s", c.Reason, ReasonResizeInfeasible)
	case !strings.Contains(c.Message, refusal.Message) || strings.Contains(c.Message, "not running"):
		t.Errorf("RestartRequired message does not give the refusal's cause (%q): %q", refusal.Message, c.Message)
	}
}
