package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	discoveryfake "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/pods"
	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/schema"
)

var pluginNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// pluginVM is a v1 VM with the run strategy rs and the status phase and reason given.
func pluginVM(t *testing.T, rs, phase, reason string) (schema.VirtualMachine, schema.Fields) {
	t.Helper()
	return requestVM(t, rs, map[string]any{"phase": phase, "reason": reason}, nil)
}

// requestVM is a v1 VM with the run strategy rs, the status and the annotations given.
func requestVM(t *testing.T, rs string, status, annotations map[string]any) (schema.VirtualMachine, schema.Fields) {
	t.Helper()
	return namedVM(t, "vm1", rs, status, annotations)
}

// namedVM is requestVM's VM, named name.
func namedVM(t *testing.T, name, rs string, status, annotations map[string]any) (schema.VirtualMachine, schema.Fields) {
	t.Helper()
	f, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{"apiVersion": "cloudnative.czs/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": name, "namespace": "ns", "annotations": annotations},
		"spec":     map[string]any{"runStrategy": rs, "resources": map[string]any{"requests": map[string]any{"cpu": 1, "memory": "1Gi"}}, "rootDisk": map[string]any{"size": "1Gi"}},
		"status":   status}
	raw, _ := json.Marshal(obj)
	return schema.ViewOf(raw, "1", f), f
}

// TestVerbs: what start, stop and restart write (nothing, the spec's run strategy or a
// request annotation) for each run strategy and state.
func TestVerbs(t *testing.T) {
	at := pluginNow.Format(requestTimeLayout)
	grace := int64(5)
	tests := map[string]struct {
		verb          string
		rs, phase     string
		reason        string
		patch         string // the merge patch as JSON; "" when nothing is written
		say, errorSay string
	}{
		"start halted":              {"start", "Halted", "Inactive", "ServerStopped", `{"metadata":{"annotations":{"cloudnative.czs/stopGracePeriodSeconds":null}},"spec":{"runStrategy":"Always"}}`, "started: runStrategy Halted -> Always", ""},
		"start always":              {"start", "Always", "Active", "ServerReady", "", "already started", ""},
		"start manual not started":  {"start", "Manual", "Inactive", "NotStarted", `{"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":"` + at + `","cloudnative.czs/stopGracePeriodSeconds":null}}}`, "start requested", ""},
		"start manual running":      {"start", "Manual", "Active", "ServerReady", "", "already running", ""},
		"start manual no phase yet": {"start", "Manual", "", "", `{"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":"` + at + `","cloudnative.czs/stopGracePeriodSeconds":null}}}`, "start requested", ""},
		"start rerun no phase yet":  {"start", "RerunOnFailure", "", "", "", "already running (no phase yet)", ""},
		"stop manual no phase yet":  {"stop", "Manual", "", "", "", "already stopped (no phase yet)", ""},
		"restart manual no phase":   {"restart", "Manual", "", "", "", "", "nothing to restart"},
		"start once failed":         {"start", "Once", "Failed", "ServerFailed", `{"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":"` + at + `","cloudnative.czs/stopGracePeriodSeconds":null}}}`, "start requested", ""},
		"start rerun creating":      {"start", "RerunOnFailure", "Creating", "ServerCreating", "", "already running", ""},
		"stop always":               {"stop", "Always", "Active", "ServerReady", `{"metadata":{"annotations":{"cloudnative.czs/stopGracePeriodSeconds":"5"}},"spec":{"runStrategy":"Halted"}}`, "runStrategy Always -> Halted, grace period 5s", ""},
		"stop halted":               {"stop", "Halted", "Inactive", "ServerStopped", "", "already stopped", ""},
		"stop manual running":       {"stop", "Manual", "Active", "ServerReady", `{"metadata":{"annotations":{"cloudnative.czs/stopGracePeriodSeconds":"5","cloudnative.czs/stopRequestedAt":"` + at + `"}}}`, "stop requested", ""},
		"stop rerun shut down":      {"stop", "RerunOnFailure", "Inactive", "GuestShutDown", "", "already stopped", ""},
		"restart always":            {"restart", "Always", "Active", "ServerReady", `{"metadata":{"annotations":{"cloudnative.czs/restartedAt":"` + at + `"}}}`, "restart requested", ""},
		"restart halted":            {"restart", "Halted", "Inactive", "ServerStopped", "", "", "nothing to restart"},
		"restart manual stopped":    {"restart", "Manual", "Inactive", "Stopped", "", "", "nothing to restart"},
		"unknown strategy":          {"start", "Sometimes", "Failed", "InvalidSpec", "", "", "has no run strategy this tool knows"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm, f := pluginVM(t, tc.rs, tc.phase, tc.reason)
			r, err := decideVerb(tc.verb, vm, f, &grace)
			if tc.errorSay != "" {
				var ec cli.ExitCoder
				if !errors.As(err, &ec) || ec.ExitCode() != 1 || !strings.Contains(err.Error(), tc.errorSay) {
					t.Fatalf("error %v, want exit 1 saying %q", err, tc.errorSay)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := patchText(r); got != tc.patch || !strings.Contains(r.say, tc.say) {
				t.Errorf("patch %s, say %q; want %s, %q", patchText(r), r.say, tc.patch, tc.say)
			}
		})
	}
}

// TestVerbsOnStatusThatNamesAServer: a stopped VM whose status still names a server gets the
// stop request (the server is deleted by it): an ended server kept for inspection, a server
// kept running beside a spec the controller refuses; a stop under way gets a second one only
// when it shortens the grace period, as does Halted's deletion under way. A paused VM's status is not read as now: its requests are
// written whatever it says, with a note; it is not migrated.
func TestVerbsOnStatusThatNamesAServer(t *testing.T) {
	at := pluginNow.Format(requestTimeLayout)
	zero := int64(0)
	server := map[string]any{"name": "vm1-server", "id": "pod-uid", "state": "Running"}
	tests := map[string]struct {
		verb, rs string
		status   map[string]any
		paused   bool
		grace    *int64
		patch    string // "" when nothing is written
		say      string
	}{
		"stop, shut down, server kept": {verb: "stop", rs: "RerunOnFailure", status: map[string]any{"phase": "Inactive", "reason": "GuestShutDown", "server": server},
			patch: `{"metadata":{"annotations":{"cloudnative.czs/stopGracePeriodSeconds":null,"cloudnative.czs/stopRequestedAt":"` + at + `"}}}`, say: "stop requested"},
		"stop, failed under Once, server kept": {verb: "stop", rs: "Once", status: map[string]any{"phase": "Failed", "reason": "ServerFailed", "server": server},
			patch: `{"metadata":{"annotations":{"cloudnative.czs/stopGracePeriodSeconds":null,"cloudnative.czs/stopRequestedAt":"` + at + `"}}}`, say: "stop requested"},
		"stop, invalid spec, server running": {verb: "stop", rs: "Manual", status: map[string]any{"phase": "Failed", "reason": "InvalidSpec", "server": server},
			patch: `{"metadata":{"annotations":{"cloudnative.czs/stopGracePeriodSeconds":null,"cloudnative.czs/stopRequestedAt":"` + at + `"}}}`, say: "stop requested"},
		"stop, stopping": {verb: "stop", rs: "Manual", status: map[string]any{"phase": "Inactive", "reason": "Stopping", "server": server},
			say: "already stopping (phase Inactive (Stopping)): nothing changed; to cut its shutdown short: kubectl vm stop vm1 -n ns --force"},
		"stop --force, stopping": {verb: "stop", rs: "Manual", status: map[string]any{"phase": "Inactive", "reason": "Stopping", "server": server}, grace: &zero,
			patch: `{"metadata":{"annotations":{"cloudnative.czs/stopGracePeriodSeconds":"0","cloudnative.czs/stopRequestedAt":"` + at + `"}}}`, say: "stop requested"},
		"stop, stopped": {verb: "stop", rs: "Manual", status: map[string]any{"phase": "Inactive", "reason": "Stopped"}, say: "already stopped"},
		"stop --force, Halted, stopping": {verb: "stop", rs: "Halted", grace: &zero, status: map[string]any{"phase": "Inactive", "reason": "ServerStopping", "server": server},
			patch: `{"metadata":{"annotations":{"cloudnative.czs/stopGracePeriodSeconds":"0","cloudnative.czs/stopRequestedAt":"` + at + `"}}}`,
			say:   "is deleted again with it"},
		"stop, Halted, stopping": {verb: "stop", rs: "Halted", status: map[string]any{"phase": "Inactive", "reason": "ServerStopping", "server": server},
			say: "already stopped (runStrategy Halted; phase Inactive (ServerStopping)): nothing changed; to cut its server's shutdown short: kubectl vm stop vm1 -n ns --force"},
		"stop --force, Halted, stopped": {verb: "stop", rs: "Halted", grace: &zero, status: map[string]any{"phase": "Inactive", "reason": "ServerStopped"},
			say: "already stopped (runStrategy Halted; phase Inactive (ServerStopped)): nothing changed"},
		"stop, Halted, lost node": {verb: "stop", rs: "Halted",
			status: map[string]any{"phase": "Inactive", "reason": "NodeLost", "message": "Server vm1-server: its node node-a does not answer", "server": server},
			say:    "its server's node does not answer, and the stop waits for it"},
		"stop, stop waits on a lost node": {verb: "stop", rs: "Manual",
			status: map[string]any{"phase": "Inactive", "reason": "NodeLost", "message": "Server vm1-server: its node node-a does not answer", "server": server},
			say:    "already stopping (phase Inactive (NodeLost)): nothing changed; its server's node does not answer, and the stop waits for it: Server vm1-server: its node node-a does not answer"},
		"stop, stopped, paused": {verb: "stop", rs: "Manual", status: map[string]any{"phase": "Inactive", "reason": "Stopped"}, paused: true,
			patch: `{"metadata":{"annotations":{"cloudnative.czs/stopGracePeriodSeconds":null,"cloudnative.czs/stopRequestedAt":"` + at + `"}}}`, say: "the VM is paused"},
		"start, running, paused": {verb: "start", rs: "Manual", status: map[string]any{"phase": "Active", "reason": "ServerReady", "server": server}, paused: true,
			patch: `{"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":"` + at + `","cloudnative.czs/stopGracePeriodSeconds":null}}}`, say: "the VM is paused"},
		"restart, stopped, paused": {verb: "restart", rs: "Manual", status: map[string]any{"phase": "Inactive", "reason": "Stopped"}, paused: true,
			patch: `{"metadata":{"annotations":{"cloudnative.czs/restartedAt":"` + at + `"}}}`, say: "the VM is paused"},
		"start, Halted, paused": {verb: "start", rs: "Halted", status: map[string]any{"phase": "Inactive", "reason": "ServerStopped"}, paused: true,
			patch: `{"metadata":{"annotations":{"cloudnative.czs/stopGracePeriodSeconds":null}},"spec":{"runStrategy":"Always"}}`,
			say:   "started: runStrategy Halted -> Always; the VM is paused"},
		"stop, Always, paused": {verb: "stop", rs: "Always", status: map[string]any{"phase": "Active", "reason": "ServerReady", "server": server}, paused: true,
			patch: `{"metadata":{"annotations":{"cloudnative.czs/stopGracePeriodSeconds":null}},"spec":{"runStrategy":"Halted"}}`,
			say:   "stopped: runStrategy Always -> Halted; the VM is paused"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var ann map[string]any
			if tc.paused {
				ann = map[string]any{schema.AnnotationPaused: "true"}
			}
			vm, f := requestVM(t, tc.rs, tc.status, ann)
			r, err := decideVerb(tc.verb, vm, f, tc.grace)
			if err != nil {
				t.Fatal(err)
			}
			if got := patchText(r); got != tc.patch || !strings.Contains(r.say, tc.say) {
				t.Errorf("patch %s, say %q; want %s, %q", got, r.say, tc.patch, tc.say)
			}
		})
	}
	vm, _ := requestVM(t, "Manual", map[string]any{"phase": "Active", "reason": "ServerReady", "server": server}, map[string]any{schema.AnnotationPaused: "true"})
	_, err := (&vmClient{namespace: "ns"}).migrationSource(context.Background(), vm, nil)
	var ec cli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != 1 || !strings.Contains(err.Error(), "is paused") {
		t.Errorf("migrate of a paused VM: %v, want a refusal saying it is paused", err)
	}
}

// decideVerb decides the verb named (start, stop or restart) on vm at pluginNow; grace is stop's.
func decideVerb(verb string, vm schema.VirtualMachine, f schema.Fields, grace *int64) (verbResult, error) {
	switch verb {
	case "start":
		return startVerb(vm, f, pluginNow)
	case "stop":
		return stopVerb(vm, f, pluginNow, grace)
	case "restart":
		return restartVerb(vm, f, pluginNow)
	}
	return verbResult{}, fmt.Errorf("no verb %q", verb)
}

// patchText is the merge patch a verb writes, as JSON; "" when it writes nothing.
func patchText(r verbResult) string {
	if r.patch == nil {
		return ""
	}
	b, _ := json.Marshal(r.patch)
	return string(b)
}

// TestVerbsWithPendingRequests: a start or stop request the controller has not carried out
// yet (its annotation differs from what status records) counts as the VM's state: the user's
// latest verb wins, withdrawing a pending one of the other kind in the same write, and a
// restart while a stop is pending is refused rather than dropped as overtaken.
func TestVerbsWithPendingRequests(t *testing.T) {
	at := pluginNow.Format(requestTimeLayout)
	const earlier, recorded = "2026-06-01T11:59:59Z", "2026-06-01T11:00:00Z"
	running := map[string]any{"phase": "Active", "reason": "ServerReady", "startRequestedAt": recorded, "stopRequestedAt": recorded}
	stoppedVM := map[string]any{"phase": "Inactive", "reason": "Stopped", "startRequestedAt": recorded, "stopRequestedAt": recorded}
	tests := map[string]struct {
		verb     string
		rs       string
		status   map[string]any
		ann      map[string]any // the VM's request annotations
		patch    string         // the merge patch as JSON; "" when nothing is written
		say      string         // in what the verb prints, or in its error when it refuses
		refusing bool
	}{
		"start withdraws a pending stop": {verb: "start", rs: "Manual", status: running,
			ann:   map[string]any{schema.AnnotationStopRequestedAt: earlier},
			patch: `{"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":"` + at + `","cloudnative.czs/stopGracePeriodSeconds":null,"cloudnative.czs/stopRequestedAt":null}}}`,
			say:   "the stop requested at " + earlier + ", not yet carried out, is withdrawn"},
		"start withdraws a pending stop under RerunOnFailure": {verb: "start", rs: "RerunOnFailure", status: running,
			ann:   map[string]any{schema.AnnotationStopRequestedAt: earlier},
			patch: `{"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":"` + at + `","cloudnative.czs/stopGracePeriodSeconds":null,"cloudnative.czs/stopRequestedAt":null}}}`,
			say:   "start requested"},
		"start of a running VM after a stop carried out changes nothing": {verb: "start", rs: "Manual", status: running,
			ann: map[string]any{schema.AnnotationStopRequestedAt: recorded}, say: "already running"},
		"stop withdraws a pending start": {verb: "stop", rs: "Manual", status: stoppedVM,
			ann:   map[string]any{schema.AnnotationStartRequestedAt: earlier},
			patch: `{"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":null,"cloudnative.czs/stopGracePeriodSeconds":null,"cloudnative.czs/stopRequestedAt":"` + at + `"}}}`,
			say:   "the start requested at " + earlier + ", not yet carried out, is withdrawn"},
		"stop withdraws a pending start under Once": {verb: "stop", rs: "Once", status: stoppedVM,
			ann:   map[string]any{schema.AnnotationStartRequestedAt: earlier},
			patch: `{"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":null,"cloudnative.czs/stopGracePeriodSeconds":null,"cloudnative.czs/stopRequestedAt":"` + at + `"}}}`,
			say:   "stop requested"},
		"stop of a stopped VM after a start carried out changes nothing": {verb: "stop", rs: "Manual", status: stoppedVM,
			ann: map[string]any{schema.AnnotationStartRequestedAt: recorded}, say: "already stopped"},
		"restart refused while a stop is pending": {verb: "restart", rs: "Manual", status: running,
			ann: map[string]any{schema.AnnotationStopRequestedAt: earlier}, refusing: true,
			say: "has a stop pending (cloudnative.czs/stopRequestedAt=" + earlier + ", not yet carried out)"},
		"restart under Always ignores a stop request": {verb: "restart", rs: "Always", status: running,
			ann:   map[string]any{schema.AnnotationStopRequestedAt: earlier},
			patch: `{"metadata":{"annotations":{"cloudnative.czs/restartedAt":"` + at + `"}}}`, say: "restart requested"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm, f := requestVM(t, tc.rs, tc.status, tc.ann)
			r, err := decideVerb(tc.verb, vm, f, nil)
			if tc.refusing {
				var ec cli.ExitCoder
				if !errors.As(err, &ec) || ec.ExitCode() != 1 || !strings.Contains(err.Error(), tc.say) || r.patch != nil {
					t.Fatalf("patch %v, error %v; want exit 1 saying %q and nothing written", r.patch, err, tc.say)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := patchText(r); got != tc.patch || !strings.Contains(r.say, tc.say) {
				t.Errorf("patch %s, say %q; want %s, %q", patchText(r), r.say, tc.patch, tc.say)
			}
		})
	}
}

// TestVerbsWithinOneSecond: stop, start and stop again within one second, each carried out
// before the next (the status records each value). The second stop must be a new request to
// the controller: its value differs from the first stop's, which the status records; at whole
// seconds they were equal and the second stop was taken for the first and never carried out.
func TestVerbsWithinOneSecond(t *testing.T) {
	grace := int64(5)
	running, f := requestVM(t, "Manual", map[string]any{"phase": "Active", "reason": "ServerReady"}, nil)
	first, err := stopVerb(running, f, pluginNow, &grace)
	if err != nil {
		t.Fatal(err)
	}
	stopAt := annotationOf(t, first, schema.AnnotationStopRequestedAt)
	later := pluginNow.Add(400 * time.Millisecond)
	started := map[string]any{"phase": "Active", "reason": "ServerReady", "stopRequestedAt": stopAt, "startRequestedAt": stopAt}
	vm, f2 := requestVM(t, "Manual", started, map[string]any{schema.AnnotationStopRequestedAt: stopAt, schema.AnnotationStartRequestedAt: stopAt})
	second, err := stopVerb(vm, f2, later, &grace)
	if err != nil {
		t.Fatal(err)
	}
	if again := annotationOf(t, second, schema.AnnotationStopRequestedAt); again == "" || again == stopAt {
		t.Fatalf("the second stop writes %q, the first's %q: the controller takes it for the one it carried out", again, stopAt)
	}
}

// annotationOf is the value a verb's patch writes to the annotation key ("" for none).
func annotationOf(t *testing.T, r verbResult, key string) string {
	t.Helper()
	b, _ := json.Marshal(r.patch)
	var p struct {
		Metadata struct {
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if v := p.Metadata.Annotations[key]; v != nil {
		return *v
	}
	return ""
}

// TestVerbsForgetGracePeriod: the grace period of a stop (--grace-period, --force) applies to
// that stop only. The controller reads the annotation at every stop, so a start removes it,
// and so does a stop without a grace period of its own; else a --force would kill the server
// of every later stop, even one made by a plain spec change.
func TestVerbsForgetGracePeriod(t *testing.T) {
	leftover := map[string]any{schema.AnnotationStopGracePeriod: "0"}
	tests := map[string]struct {
		verb, rs string
		status   map[string]any
	}{
		"start on Halted":              {"start", "Halted", map[string]any{"phase": "Inactive", "reason": "ServerStopped"}},
		"start on Manual":              {"start", "Manual", map[string]any{"phase": "Inactive", "reason": "Stopped"}},
		"start on Once after shutdown": {"start", "Once", map[string]any{"phase": "Inactive", "reason": "GuestShutDown"}},
		"plain stop on Always":         {"stop", "Always", map[string]any{"phase": "Active", "reason": "ServerReady"}},
		"plain stop on Manual":         {"stop", "Manual", map[string]any{"phase": "Active", "reason": "ServerReady"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm, f := requestVM(t, tc.rs, tc.status, leftover)
			var r verbResult
			var err error
			if tc.verb == "start" {
				r, err = startVerb(vm, f, pluginNow)
			} else {
				r, err = stopVerb(vm, f, pluginNow, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			md, _ := r.patch["metadata"].(map[string]any)
			ann, _ := md["annotations"].(map[string]any)
			if v, ok := ann[schema.AnnotationStopGracePeriod]; !ok || v != nil {
				t.Errorf("patch %v keeps %s=0 for the next stop", r.patch, schema.AnnotationStopGracePeriod)
			}
		})
	}
}

// TestParseFor: wait's --for.
func TestParseFor(t *testing.T) {
	tests := map[string]struct {
		in   string
		want waitFor
		err  bool
	}{
		"phase":           {"phase=Active", waitFor{phase: schema.PhaseActive}, false},
		"phase any case":  {"phase=inactive", waitFor{phase: schema.PhaseInactive}, false},
		"condition":       {"condition=Ready", waitFor{condition: "Ready", status: schema.ConditionTrue}, false},
		"condition false": {"condition=Ready=false", waitFor{condition: "Ready", status: schema.ConditionFalse}, false},
		"unknown phase":   {"phase=Running", waitFor{}, true},
		"bad status":      {"condition=Ready=maybe", waitFor{}, true},
		"no kind":         {"Active", waitFor{}, true},
		"empty condition": {"condition=", waitFor{}, true},
		"other kind":      {"delete", waitFor{}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseFor(tc.in)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("parseFor(%q) = %+v, %v", tc.in, got, err)
			}
		})
	}
}

// TestPluginConfigValidate: the verbs' flags, checked before the cluster is asked.
func TestPluginConfigValidate(t *testing.T) {
	ok := pluginConfig{resourceFlags: resourceFlags{APIVersion: schema.DefaultAPIVersion}}
	tests := map[string]struct {
		c   validator
		err string
	}{
		"plain":                {&ok, ""},
		"bad version":          {&pluginConfig{resourceFlags: resourceFlags{APIVersion: "v1"}}, "--api-version"},
		"stop grace":           {&stopConfig{pluginConfig: ok, GracePeriod: 30}, ""},
		"stop force":           {&stopConfig{pluginConfig: ok, GracePeriod: -1, Force: true}, ""},
		"stop force grace 0":   {&stopConfig{pluginConfig: ok, GracePeriod: 0, Force: true}, ""},
		"stop force and grace": {&stopConfig{pluginConfig: ok, GracePeriod: 3, Force: true}, "--force with --grace-period 3"},
		"stop negative grace":  {&stopConfig{pluginConfig: ok, GracePeriod: -2}, "--grace-period -2"},
		"stop grace too long":  {&stopConfig{pluginConfig: ok, GracePeriod: 1 << 31}, "--grace-period 2147483648"},
		"wait":                 {&waitConfig{pluginConfig: ok, For: "phase=Active", Timeout: time.Second}, ""},
		"wait without for":     {&waitConfig{pluginConfig: ok, Timeout: time.Second}, "--for is required"},
		"wait zero timeout":    {&waitConfig{pluginConfig: ok, For: "condition=Ready", Timeout: 0}, "--timeout"},
		"wait unreachable 0":   {&waitConfig{pluginConfig: ok, For: "phase=Active", Timeout: time.Second, UnreachableTimeout: 0}, ""},
		"wait unreachable -1s": {&waitConfig{pluginConfig: ok, For: "phase=Active", Timeout: time.Second, UnreachableTimeout: -time.Second},
			"--unreachable-timeout -1s: want a positive duration such as 1m, or 0 to wait out --timeout"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.c.Validate()
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("Validate() = %v, want %q", err, tc.err)
			}
		})
	}
}

// TestPluginArgs: flags after the VM's name and before the verb work, as with kubectl.
func TestPluginArgs(t *testing.T) {
	tests := map[string]struct{ in, want []string }{
		"flags after":   {[]string{"kubectl-vm", "stop", "vm1", "-n", "ns", "--force"}, []string{"kubectl-vm", "stop", "-n", "ns", "--force", "--", "vm1"}},
		"flags before":  {[]string{"kubectl-vm", "wait", "--for=phase=Active", "vm1"}, []string{"kubectl-vm", "wait", "--for=phase=Active", "--", "vm1"}},
		"no args":       {[]string{"kubectl-vm", "--help"}, []string{"kubectl-vm", "--help"}},
		"double dash":   {[]string{"kubectl-vm", "start", "--", "-odd"}, []string{"kubectl-vm", "start", "--", "-odd"}},
		"just the verb": {[]string{"kubectl-vm", "status", "vm1"}, []string{"kubectl-vm", "status", "--", "vm1"}},
		"namespace before the verb": {[]string{"kubectl-vm", "-n", "ns", "stop", "vm1", "--force"},
			[]string{"kubectl-vm", "stop", "-n", "ns", "--force", "--", "vm1"}},
		"flags on both sides": {[]string{"kubectl-vm", "--namespace=ns", "--context", "c1", "wait", "vm1", "--for", "phase=Active"},
			[]string{"kubectl-vm", "wait", "--namespace=ns", "--context", "c1", "--for", "phase=Active", "--", "vm1"}},
		"a flag only":       {[]string{"kubectl-vm", "-n", "ns"}, []string{"kubectl-vm", "-n", "ns"}},
		"help before":       {[]string{"kubectl-vm", "--help", "stop"}, []string{"kubectl-vm", "--help", "stop"}},
		"help after a flag": {[]string{"kubectl-vm", "-n", "ns", "--help"}, []string{"kubectl-vm", "--help"}},
		"the verb alone":    {[]string{"kubectl-vm", "status"}, []string{"kubectl-vm", "status"}},
		"version":           {[]string{"kubectl-vm", "--version"}, []string{"kubectl-vm", "--version"}},
		// -n with its value joined, as kubectl takes it; -namespace is the long flag.
		"-nNS after":  {[]string{"kubectl-vm", "status", "tb", "-nteam-b"}, []string{"kubectl-vm", "status", "-n", "team-b", "--", "tb"}},
		"-nNS before": {[]string{"kubectl-vm", "-nteam-b", "status", "tb"}, []string{"kubectl-vm", "status", "-n", "team-b", "--", "tb"}},
		"-n=NS":       {[]string{"kubectl-vm", "status", "tb", "-n=team-b"}, []string{"kubectl-vm", "status", "-n=team-b", "--", "tb"}},
		"-namespace NS": {[]string{"kubectl-vm", "status", "tb", "-namespace", "team-b"},
			[]string{"kubectl-vm", "status", "-namespace", "team-b", "--", "tb"}},
		"--namespace=NS": {[]string{"kubectl-vm", "status", "tb", "--namespace=team-b"}, []string{"kubectl-vm", "status", "--namespace=team-b", "--", "tb"}},
		"-nNS after --":  {[]string{"kubectl-vm", "start", "--", "-nodd"}, []string{"kubectl-vm", "start", "--", "-nodd"}},
		// A value flag last, without its value: last it stays, for the verb to refuse.
		"-n last":          {[]string{"kubectl-vm", "status", "vm1", "-n"}, []string{"kubectl-vm", "status", "-n"}},
		"--namespace last": {[]string{"kubectl-vm", "-n", "ns", "status", "vm1", "--namespace"}, []string{"kubectl-vm", "status", "-n", "ns", "--namespace"}},
		"--force last":     {[]string{"kubectl-vm", "stop", "vm1", "--force"}, []string{"kubectl-vm", "stop", "--force", "--", "vm1"}},
		// A verb's help, whatever else is given: the verb's help alone.
		"help after the name":  {[]string{"kubectl-vm", "stop", "test-vm", "--help"}, []string{"kubectl-vm", "stop", "--help"}},
		"-h before the name":   {[]string{"kubectl-vm", "stop", "-h", "test-vm"}, []string{"kubectl-vm", "stop", "--help"}},
		"help among flags":     {[]string{"kubectl-vm", "wait", "test-vm", "--for", "phase=Active", "--help"}, []string{"kubectl-vm", "wait", "--help"}},
		"help as a flag value": {[]string{"kubectl-vm", "status", "vm1", "-n", "--help"}, []string{"kubectl-vm", "status", "-n", "--help", "--", "vm1"}},
		// A flag no verb has takes no value: the verb after it is the verb.
		"unknown flag before the verb": {[]string{"kubectl-vm", "--bogus", "status", "x"}, []string{"kubectl-vm", "status", "--bogus", "--", "x"}},
		"unknown flag before the name": {[]string{"kubectl-vm", "stop", "--bogus", "x"}, []string{"kubectl-vm", "stop", "--bogus", "--", "x"}},
		"unknown flag last":            {[]string{"kubectl-vm", "stop", "x", "--bogus"}, []string{"kubectl-vm", "stop", "--bogus", "--", "x"}},
	}
	for name, tc := range tests {
		if got := PluginArgs(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
	if !IsPlugin("/usr/local/bin/kubectl-vm") || IsPlugin("vm-controller") {
		t.Error("IsPlugin")
	}
}

// TestMigrateRefusals: migrate refuses, with one line and nothing written, a VM that does not
// run, a disk pinned to its node, a cluster without another schedulable node, and a disk whose
// other nodes none takes the next server (a zone's whose other node is cordoned, not Ready or
// out of the placement, while another zone has room: the controller's room check refuses
// it so, naming the disk); otherwise it writes the request.
func TestMigrateRefusals(t *testing.T) {
	node := func(name string, ready, unschedulable bool, taints ...corev1.Taint) *corev1.Node {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: unschedulable, Taints: taints},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "vm1-server", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "vm1-rootdisk", Namespace: "ns"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv1"}}
	// pvOn is the claim's volume, with a required node affinity key=value (none when key is
	// ""); pv, on n1 by key. The hostname label, or a driver's own node label, pins it to n1;
	// a zone that n2 shares does not (the scheduler keeps the server in it).
	pvOn := func(key, value string) *corev1.PersistentVolume {
		v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}}
		if key != "" {
			v.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}}}}
		}
		return v
	}
	pv := func(key string) *corev1.PersistentVolume { return pvOn(key, "n1") }
	// zoned is a node of zone a, with its name as the hostname and as a driver's node label.
	zoned := func(n *corev1.Node) *corev1.Node {
		n.Labels = map[string]string{corev1.LabelHostname: n.Name, corev1.LabelTopologyZone: "a", "topology.topolvm.io/node": n.Name}
		return n
	}
	taint := corev1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	// placed is the server pod made with placement p, after a migration that kept it off n3.
	placed := func(p backend.Placement) *corev1.Pod {
		out := pod.DeepCopy()
		out.Annotations = map[string]string{pods.AnnotationPlacement: p.Canonical()}
		out.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"n3"}}}}}}}}
		return out
	}
	// admitted is p with the toleration of taint that admission gave it.
	admitted := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoSchedule})
		return p
	}
	labelled := func(n *corev1.Node, k, v string) *corev1.Node {
		n.Labels = map[string]string{k: v}
		return n
	}
	withLabel := func(n *corev1.Node, k, v string) *corev1.Node {
		n.Labels[k] = v
		return n
	}
	ssd := backend.Placement{NodeSelector: map[string]string{"disk": "ssd"}}
	// inReach is the refusal of a zone's disk none of whose other nodes takes the next server.
	const inReach = "virtualmachine/vm1 cannot migrate: no other Ready node than n1 that its disk vm1-rootdisk can be reached from " +
		"(its volume's node affinity) and that its placement admits"
	tolerant := backend.Placement{Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}
	cordonTolerant := backend.Placement{Tolerations: []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}
	tests := map[string]struct {
		phase   string
		objects []runtime.Object
		refuse  string // "" : the request is written
	}{
		"not running": {"Inactive", []runtime.Object{pod, node("n1", true, false), node("n2", true, false)}, "is not running"},
		"one node":    {"Active", []runtime.Object{pod, claim, pv(""), node("n1", true, false), node("n2", false, false)}, "no other Ready node than n1"},
		"cordoned":    {"Active", []runtime.Object{pod, claim, pv(""), node("n1", true, false), node("n2", true, true)}, "no other Ready node"},
		"tainted":     {"Active", []runtime.Object{pod, claim, pv(""), node("n1", true, false), node("n2", true, false, taint)}, "no other Ready node"},
		"pinned disk": {"Active", []runtime.Object{pod, claim, pv(corev1.LabelHostname), zoned(node("n1", true, false)), zoned(node("n2", true, false))}, "its disk vm1-rootdisk cannot follow it"},
		"disk pinned by a driver's node label": {"Active", []runtime.Object{pod, claim, pv("topology.topolvm.io/node"), zoned(node("n1", true, false)),
			zoned(node("n2", true, false))}, "its disk vm1-rootdisk cannot follow it"},
		"zoned disk, no other node in the zone": {"Active", []runtime.Object{pod, claim, pvOn(corev1.LabelTopologyZone, "a"), zoned(node("n1", true, false)),
			labelled(node("n2", true, false), corev1.LabelTopologyZone, "b")}, "its disk vm1-rootdisk cannot follow it"},
		"zoned disk": {"Active", []runtime.Object{pod, claim, pvOn(corev1.LabelTopologyZone, "a"), zoned(node("n1", true, false)), zoned(node("n2", true, false))}, ""},
		"zoned disk, other node in the zone cordoned": {"Active", []runtime.Object{pod, claim, pvOn(corev1.LabelTopologyZone, "a"), zoned(node("n1", true, false)),
			zoned(node("n2", true, true)), labelled(node("n3", true, false), corev1.LabelTopologyZone, "b")}, inReach},
		"zoned disk, other node in the zone not Ready": {"Active", []runtime.Object{pod, claim, pvOn(corev1.LabelTopologyZone, "a"), zoned(node("n1", true, false)),
			zoned(node("n2", false, false)), labelled(node("n3", true, false), corev1.LabelTopologyZone, "b")}, inReach},
		"zoned disk, other node in the zone tainted": {"Active", []runtime.Object{pod, claim, pvOn(corev1.LabelTopologyZone, "a"), zoned(node("n1", true, false)),
			zoned(node("n2", true, false, taint)), labelled(node("n3", true, false), corev1.LabelTopologyZone, "b")}, inReach},
		"zoned disk, placement admits only another zone": {"Active", []runtime.Object{placed(ssd), claim, pvOn(corev1.LabelTopologyZone, "a"),
			zoned(node("n1", true, false)), zoned(node("n2", true, false)), withLabel(labelled(node("n4", true, false), corev1.LabelTopologyZone, "b"), "disk", "ssd")}, inReach},
		// Every node is in the disk's reach: the disk ruled none out, and goes unnamed.
		"zoned disk, every other node cordoned": {"Active", []runtime.Object{pod, claim, pvOn(corev1.LabelTopologyZone, "a"), zoned(node("n1", true, false)),
			zoned(node("n2", true, true))}, "no other Ready node than n1 that its placement admits"},
		"zoned disk, a free node in the zone beside a cordoned one": {"Active", []runtime.Object{pod, claim, pvOn(corev1.LabelTopologyZone, "a"),
			zoned(node("n1", true, false)), zoned(node("n2", true, true)), zoned(node("n4", true, false)), labelled(node("n3", true, false), corev1.LabelTopologyZone, "b")}, ""},
		"no server pod": {"Active", []runtime.Object{node("n1", true, false)}, `the server pod vm1-server not found in namespace "ns"`},
		"moves":         {"Active", []runtime.Object{pod, claim, pv(""), node("n1", true, false), node("n2", true, false)}, ""},
		"placement admits no other": {"Active", []runtime.Object{placed(ssd), claim, pv(""), labelled(node("n1", true, false), "disk", "ssd"),
			labelled(node("n2", true, false), "disk", "hdd")}, "no other Ready node than n1 that its placement admits"},
		"placement admits another": {"Active", []runtime.Object{placed(ssd), claim, pv(""), node("n1", true, false),
			labelled(node("n2", true, false), "disk", "ssd")}, ""},
		"taint tolerated by placement": {"Active", []runtime.Object{placed(tolerant), claim, pv(""), node("n1", true, false),
			node("n2", true, false, taint)}, ""},
		// The cordon counts as its taint, as the scheduler and the controller's room check read it.
		"cordon tolerated by placement": {"Active", []runtime.Object{placed(cordonTolerant), claim, pv(""), node("n1", true, false),
			node("n2", true, true)}, ""},
		"cordon and its taint tolerated by placement": {"Active", []runtime.Object{placed(cordonTolerant), claim, pv(""), node("n1", true, false),
			node("n2", true, true, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})}, ""},
		"cordon with its taint, not tolerated": {"Active", []runtime.Object{pod, claim, pv(""), node("n1", true, false),
			node("n2", true, true, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})}, "no other Ready node"},
		// Admission gave the pod the toleration (a namespace's default), beyond its placement.
		"taint tolerated by admission": {"Active", []runtime.Object{admitted(placed(backend.Placement{})), claim, pv(""), node("n1", true, false),
			node("n2", true, false, taint)}, ""},
		"node a past move avoided": {"Active", []runtime.Object{placed(backend.Placement{}), claim, pv(""), node("n1", true, false),
			node("n3", true, false)}, ""},
	}
	gvr := k8sschema.GroupVersionResource{Group: schema.Group, Version: "v1alpha1", Resource: "virtualmachines"}
	f, err := schema.ForVersion(gvr.GroupVersion())
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cloudnative.czs/v1alpha1", "kind": "VirtualMachine",
				"metadata": map[string]any{"name": "vm1", "namespace": "ns", "resourceVersion": "1"},
				"spec":     map[string]any{"action": "active", "resource": map[string]any{"cpu": "1", "memory": "1Gi", "rootDisk": "1Gi"}},
				"status": map[string]any{"phase": tc.phase, "reason": "x", "server": map[string]any{"name": "vm1-server", "id": "u", "state": "Running"},
					"rootDisk": map[string]any{"claimName": "vm1-rootdisk", "phase": "Bound"}}}}
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[k8sschema.GroupVersionResource]string{gvr: "VirtualMachineList"}, vm)
			var out bytes.Buffer
			v := &vmClient{vms: dyn.Resource(gvr).Namespace("ns"), kube: kubefake.NewClientset(tc.objects...), fields: f, gvr: gvr,
				namespace: "ns", out: &out, now: func() time.Time { return pluginNow }}
			err := v.migrate(context.Background(), "vm1", nil)
			patched := false
			for _, a := range dyn.Actions() {
				patched = patched || a.GetVerb() == "patch"
			}
			if tc.refuse != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refuse) || strings.Contains(err.Error(), "\n") || patched {
					t.Fatalf("err %v (patched %v), want a one-line refusal with %q and no write", err, patched, tc.refuse)
				}
				return
			}
			got, _ := dyn.Resource(gvr).Namespace("ns").Get(context.Background(), "vm1", metav1.GetOptions{})
			if err != nil || got.GetAnnotations()[schema.AnnotationMigrateRequestedAt] != pluginNow.Format(requestTimeLayout) {
				t.Fatalf("err %v, annotations %v", err, got.GetAnnotations())
			}
		})
	}

}

// TestReadNotFound: a VM that does not exist is one line, exit 1; when the reason is that the
// API server does not serve the version asked for (--api-version), or not the resource in it,
// the line says so (a GET answers 404 either way).
func TestReadNotFound(t *testing.T) {
	gvr := k8sschema.GroupVersionResource{Group: schema.Group, Version: "v1alpha1", Resource: "virtualmachines"}
	f, err := schema.ForVersion(gvr.GroupVersion())
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		served []*metav1.APIResourceList // what discovery says the API server serves
		want   string
	}{
		"no such VM": {[]*metav1.APIResourceList{{GroupVersion: "cloudnative.czs/v1alpha1", APIResources: []metav1.APIResource{{Name: "virtualmachines"}}}},
			`virtualmachine "nope" not found in namespace "ns"`},
		"version not served": {[]*metav1.APIResourceList{{GroupVersion: "cloudnative.czs/v1", APIResources: []metav1.APIResource{{Name: "virtualmachines"}}}},
			`virtualmachine "nope" not found in namespace "ns": the API server does not serve cloudnative.czs/v1alpha1 (--api-version)`},
		"resource not served in the version": {[]*metav1.APIResourceList{{GroupVersion: "cloudnative.czs/v1alpha1", APIResources: []metav1.APIResource{{Name: "machines"}}}},
			`virtualmachine "nope" not found in namespace "ns": the API server serves no virtualmachines in cloudnative.czs/v1alpha1 (--resource)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[k8sschema.GroupVersionResource]string{gvr: "VirtualMachineList"})
			kube := kubefake.NewClientset()
			kube.Discovery().(*discoveryfake.FakeDiscovery).Resources = tc.served
			v := &vmClient{vms: dyn.Resource(gvr).Namespace("ns"), kube: kube, fields: f, gvr: gvr, namespace: "ns", now: time.Now}
			_, _, err := v.get(context.Background(), "nope")
			var ec cli.ExitCoder
			if !errors.As(err, &ec) || ec.ExitCode() != 1 || err.Error() != tc.want {
				t.Errorf("get of a missing VM: %v, want exit 1 saying %q", err, tc.want)
			}
		})
	}
}

// TestMigrateRefusedWhileStopPending: a migration written while a stop waits under a strategy
// that heeds it would be dropped as overtaken; migrate refuses it and writes nothing.
func TestMigrateRefusedWhileStopPending(t *testing.T) {
	gvr := k8sschema.GroupVersionResource{Group: schema.Group, Version: "v1alpha1", Resource: "virtualmachines"}
	f, err := schema.ForVersion(gvr.GroupVersion())
	if err != nil {
		t.Fatal(err)
	}
	vm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cloudnative.czs/v1alpha1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "vm1", "namespace": "ns", "resourceVersion": "1",
			"annotations": map[string]any{schema.AnnotationStopRequestedAt: "2026-06-01T11:59:59Z"}},
		"spec": map[string]any{"action": "manual", "resource": map[string]any{"cpu": "1", "memory": "1Gi", "rootDisk": "1Gi"}},
		"status": map[string]any{"phase": "Active", "reason": "ServerReady", "server": map[string]any{"name": "vm1-server", "id": "u", "state": "Running"},
			"stopRequestedAt": "2026-06-01T11:00:00Z"}}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[k8sschema.GroupVersionResource]string{gvr: "VirtualMachineList"}, vm)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "vm1-server", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	v := &vmClient{vms: dyn.Resource(gvr).Namespace("ns"), kube: kubefake.NewClientset(pod), fields: f, gvr: gvr,
		namespace: "ns", out: &bytes.Buffer{}, now: func() time.Time { return pluginNow }}
	err = v.migrate(context.Background(), "vm1", nil)
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "patch" {
			t.Fatalf("a migration was written with a stop pending")
		}
	}
	var ec cli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != 1 || !strings.Contains(err.Error(), "has a stop pending") {
		t.Fatalf("err %v, want exit 1 naming the pending stop", err)
	}
}

// waitClient is a vmClient of one v1alpha1 VM, whose status is status, on a fake API server;
// react, when not nil, is put before the fake's own handling of every request.
func waitClient(t *testing.T, metadata, status map[string]any, react k8stesting.ReactionFunc, watchReact k8stesting.WatchReactionFunc) (*vmClient, *dynamicfake.FakeDynamicClient, *bytes.Buffer) {
	t.Helper()
	gvr := k8sschema.GroupVersionResource{Group: schema.Group, Version: "v1alpha1", Resource: "virtualmachines"}
	f, err := schema.ForVersion(gvr.GroupVersion())
	if err != nil {
		t.Fatal(err)
	}
	md := map[string]any{"name": "vm1", "namespace": "ns", "resourceVersion": "1", "generation": int64(1)}
	for k, v := range metadata {
		md[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cloudnative.czs/v1alpha1", "kind": "VirtualMachine",
		"metadata": md, "spec": map[string]any{"action": "active"}, "status": status}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[k8sschema.GroupVersionResource]string{gvr: "VirtualMachineList"}, u)
	if react != nil {
		dyn.PrependReactor("*", "virtualmachines", react)
	}
	if watchReact != nil {
		dyn.PrependWatchReactor("virtualmachines", watchReact)
	}
	var out bytes.Buffer
	return &vmClient{vms: dyn.Resource(gvr).Namespace("ns"), kube: kubefake.NewClientset(), fields: f, gvr: gvr, namespace: "ns",
		out: &out, now: time.Now}, dyn, &out
}

// TestWaitWatchErrors: a read or watch the API server refuses (forbidden, unauthorized) ends
// wait at once with one line saying so; any other failed watch is made again after a backoff,
// not in a tight loop, until the timeout.
func TestWaitWatchErrors(t *testing.T) {
	gr := k8sschema.GroupResource{Group: schema.Group, Resource: "virtualmachines"}
	refuseList := func(err error) k8stesting.ReactionFunc {
		return func(a k8stesting.Action) (bool, runtime.Object, error) { return a.GetVerb() == "list", nil, err }
	}
	refuseWatch := func(err error) k8stesting.WatchReactionFunc {
		return func(k8stesting.Action) (bool, watch.Interface, error) { return true, nil, err }
	}
	tests := map[string]struct {
		list     k8stesting.ReactionFunc
		watch    k8stesting.WatchReactionFunc
		say      string // in the error
		maxCalls int    // of list and watch together, within the timeout
	}{
		"watch forbidden":    {watch: refuseWatch(apierrors.NewForbidden(gr, "vm1", errors.New("no watch"))), say: "cannot watch virtualmachine \"vm1\" in namespace \"ns\": forbidden", maxCalls: 2},
		"watch unauthorized": {watch: refuseWatch(apierrors.NewUnauthorized("token expired")), say: "unauthorized (token expired)", maxCalls: 2},
		"list forbidden":     {list: refuseList(apierrors.NewForbidden(gr, "vm1", errors.New("no list"))), say: "cannot read virtualmachine \"vm1\" in namespace \"ns\": forbidden", maxCalls: 1},
		"list unauthorized":  {list: refuseList(apierrors.NewUnauthorized("token expired")), say: "unauthorized", maxCalls: 1},
		"watch fails otherwise": {watch: refuseWatch(apierrors.NewInternalError(errors.New("etcd is away"))),
			say: "timed out after 500ms waiting for phase=Active of virtualmachine/vm1; last seen: phase Creating (last error: Internal error occurred: etcd is away)", maxCalls: 10},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v, dyn, _ := waitClient(t, nil, map[string]any{"phase": "Creating", "observedGeneration": int64(1)}, tc.list, tc.watch)
			w, _ := parseFor("phase=Active")
			start := time.Now()
			err := v.wait(context.Background(), "vm1", w, "phase=Active", 500*time.Millisecond, waitReachGrace)
			var ec cli.ExitCoder
			if !errors.As(err, &ec) || ec.ExitCode() != 1 || !strings.Contains(err.Error(), tc.say) {
				t.Fatalf("err %v, want exit 1 saying %q", err, tc.say)
			}
			if calls := len(dyn.Actions()); calls > tc.maxCalls {
				t.Errorf("%d reads and watches in %s, want at most %d", calls, time.Since(start), tc.maxCalls)
			}
		})
	}
}

// TestWaitRecoversFromTooOldResourceVersion: wait watches from the resourceVersion of the list
// that read the VM, the API server's present, not from the VM's own (that of its last change,
// which on a VM nobody touched for a while is older than the history the API server keeps: the
// watch ends at once with 410 Gone). A 410 that comes all the same (a watch that fell behind)
// is answered by listing again, and is no error of the wait: the timeout does not report it.
func TestWaitRecoversFromTooOldResourceVersion(t *testing.T) {
	tests := map[string]struct {
		expire func(rv, present int64, watches int) bool // whether the API server answers a watch from rv with 410
		later  map[string]any                            // the status the controller writes 200ms in; nil: none
		met    bool
		quiet  bool // no watch may meet a 410: each starts from the present
	}{
		"a quiet VM, its own resourceVersion past the history": {
			expire: func(rv, present int64, _ int) bool { return rv < present }, quiet: true},
		"a 410 at the first watch, then the VM is Active": {
			expire: func(_, _ int64, watches int) bool { return watches == 1 },
			later:  map[string]any{"phase": "Active", "reason": "ServerReady", "observedGeneration": int64(1)}, met: true},
		"a 410 at the first watch, nothing changes": {
			expire: func(_, _ int64, watches int) bool { return watches == 1 }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var v *vmClient
			var dyn *dynamicfake.FakeDynamicClient
			var mu sync.Mutex
			watches, expired := 0, 0
			react := func(a k8stesting.Action) (bool, watch.Interface, error) {
				mu.Lock()
				defer mu.Unlock()
				watches++
				rv, _ := strconv.ParseInt(a.(k8stesting.WatchAction).GetWatchRestrictions().ResourceVersion, 10, 64)
				l, err := dyn.Tracker().List(v.gvr, v.gvr.GroupVersion().WithKind("VirtualMachine"), "ns")
				if err != nil {
					t.Error(err)
					return false, nil, nil
				}
				present, _ := strconv.ParseInt(l.(metav1.ListInterface).GetResourceVersion(), 10, 64)
				if !tc.expire(rv, present, watches) {
					return false, nil, nil
				}
				expired++
				w := watch.NewRaceFreeFake()
				w.Error(&apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, present)).ErrStatus)
				w.Stop()
				return true, w, nil
			}
			v, dyn, _ = waitClient(t, nil, map[string]any{"phase": "Creating", "observedGeneration": int64(1)}, nil, react)
			if tc.later != nil {
				go statusLater(dyn, v.gvr, tc.later, 200*time.Millisecond)
			}
			w, _ := parseFor("phase=Active")
			err := v.wait(context.Background(), "vm1", w, "phase=Active", 700*time.Millisecond, waitReachGrace)
			mu.Lock()
			defer mu.Unlock()
			if tc.quiet && expired > 0 {
				t.Errorf("%d of %d watches started before the present and met a 410", expired, watches)
			}
			if tc.met {
				if err != nil {
					t.Fatalf("wait: %v (410 answered to %d of %d watches), want the condition met", err, expired, watches)
				}
				return
			}
			const want = "timed out after 700ms waiting for phase=Active of virtualmachine/vm1; last seen: phase Creating"
			if err == nil || err.Error() != want {
				t.Fatalf("wait: %v (410 answered to %d of %d watches), want %q", err, expired, watches, want)
			}
			lists := 0
			for _, a := range dyn.Actions() {
				if a.GetVerb() == "list" {
					lists++
				}
			}
			if lists < 1+expired {
				t.Errorf("%d lists for %d watches answered 410, want a list after each", lists, expired)
			}
		})
	}
}

// TestWaitForSettledStatus: wait counts a phase or condition only in a status that describes
// the VM as it is: not while a request it carries is still pending (a wait right after restart
// or migrate would otherwise return at once on the old server's Ready), nor before the
// controller observed its generation; and phase Inactive only once the server is gone. Of a
// paused VM only the condition Paused counts (the rest of its status is as it was before the
// pause, an old server's Ready and Active), and any other wait waits until the VM is resumed
// and the controller has written its status again.
func TestWaitForSettledStatus(t *testing.T) {
	const old, asked = "2026-06-01T10:00:00Z", "2026-06-01T12:00:00Z"
	ready := []any{map[string]any{"type": "Ready", "status": "True", "reason": "ServerReady", "message": "", "lastTransitionTime": old}}
	active := func(extra map[string]any) map[string]any {
		st := map[string]any{"phase": "Active", "reason": "ServerReady", "observedGeneration": int64(1), "conditions": ready,
			"restartedAt": old, "startRequestedAt": old, "stopRequestedAt": old, "migration": map[string]any{"requestedAt": old, "phase": "Succeeded"}}
		for k, v := range extra {
			st[k] = v
		}
		return st
	}
	ann := func(key string) map[string]any { return map[string]any{"annotations": map[string]any{key: asked}} }
	// A paused VM with a request of key, and its status: the Paused condition, and the rest as
	// before it was paused.
	pausedWith := func(key string) map[string]any {
		return map[string]any{"annotations": map[string]any{key: asked, schema.AnnotationPaused: "true"}}
	}
	pausedReady := active(map[string]any{"conditions": append([]any{
		map[string]any{"type": "Paused", "status": "True", "reason": "Paused", "message": "", "lastTransitionTime": old}}, ready...)})
	pausedOnly := map[string]any{"annotations": map[string]any{schema.AnnotationPaused: "true"}}
	stopping := map[string]any{"name": "vm1-server", "id": "pod-uid", "state": "Running"}
	// What the timeout says of a status that is not current.
	const (
		yetToAct = "the controller has yet to act on a request or a spec change of the VM"
		isPaused = "(paused: the controller acts on nothing of the VM until the annotation cloudnative.czs/paused goes)"
		resuming = "(resumed: the controller has yet to report on the VM again)"
	)
	tests := map[string]struct {
		for_     string
		metadata map[string]any
		status   map[string]any
		later    map[string]any // the status the controller writes 100ms in; nil: none
		met      bool
		says     string // in the timeout's message; "": not checked
	}{
		"Ready, nothing pending": {"condition=Ready", nil, active(nil), nil, true, ""},
		// Condition types and phases in any case, as kubectl wait matches condition types.
		"ready, in lower case":                  {"condition=ready", nil, active(nil), nil, true, ""},
		"READY=TRUE, in upper case":             {"condition=READY=TRUE", nil, active(nil), nil, true, ""},
		"active, in lower case":                 {"phase=active", nil, active(nil), nil, true, ""},
		"paused, in lower case":                 {"condition=paused", pausedOnly, pausedReady, nil, true, ""},
		"ready of a paused VM, in lower case":   {"condition=ready", pausedOnly, pausedReady, nil, false, isPaused},
		"Ready with a restart pending":          {"condition=Ready", ann(schema.AnnotationRestartedAt), active(nil), nil, false, yetToAct},
		"Ready once the restart is carried out": {"condition=Ready", ann(schema.AnnotationRestartedAt), active(nil), active(map[string]any{"restartedAt": asked}), true, ""},
		"Ready with a migration pending":        {"condition=Ready", ann(schema.AnnotationMigrateRequestedAt), active(nil), nil, false, yetToAct},
		"Active with a stop pending":            {"phase=Active", ann(schema.AnnotationStopRequestedAt), active(nil), nil, false, yetToAct},
		"Active before the spec is observed":    {"phase=Active", map[string]any{"generation": int64(2)}, active(nil), nil, false, yetToAct},
		// The timeout says what is still missing: phase Inactive alone reads as the phase asked for.
		"Inactive while the server stops": {"phase=Inactive", nil,
			map[string]any{"phase": "Inactive", "reason": "Stopping", "observedGeneration": int64(1), "server": stopping},
			nil, false, "last seen: phase Inactive, but its server vm1-server is still stopping (Stopping)"},
		"Inactive while the server stops under Halted": {"phase=Inactive", nil,
			map[string]any{"phase": "Inactive", "reason": "ServerStopping", "observedGeneration": int64(1)},
			nil, false, "last seen: phase Inactive, but its server is still stopping (ServerStopping)"},
		"Inactive while the server's node does not answer": {"phase=Inactive", nil,
			map[string]any{"phase": "Inactive", "reason": "NodeLost", "observedGeneration": int64(1), "server": stopping},
			nil, false, "last seen: phase Inactive, but its server vm1-server may still run: its node does not answer (NodeLost)"},
		"Inactive once the server is gone": {"phase=Inactive", nil,
			map[string]any{"phase": "Inactive", "reason": "Stopping", "observedGeneration": int64(1)},
			map[string]any{"phase": "Inactive", "reason": "Stopped", "observedGeneration": int64(1)}, true, ""},
		"Paused with a stop pending":              {"condition=Paused", pausedWith(schema.AnnotationStopRequestedAt), pausedReady, nil, true, ""},
		"Paused before the spec is observed":      {"condition=Paused", map[string]any{"generation": int64(2), "annotations": map[string]any{schema.AnnotationPaused: "true"}}, pausedReady, nil, true, ""},
		"Paused, nothing pending":                 {"condition=Paused", pausedOnly, pausedReady, nil, true, ""},
		"Ready of a paused VM, a restart pending": {"condition=Ready", pausedWith(schema.AnnotationRestartedAt), pausedReady, nil, false, isPaused},
		// The status from before the pause says Ready and Active; the server may be gone.
		"Ready of a paused VM, nothing pending":  {"condition=Ready", pausedOnly, pausedReady, nil, false, isPaused},
		"Active of a paused VM, nothing pending": {"phase=Active", pausedOnly, pausedReady, nil, false, isPaused},
		"Ready of a VM paused, not yet reported": {"condition=Ready", pausedOnly, active(nil), nil, false, isPaused},
		"Active of a paused VM being deleted": {"phase=Active", map[string]any{"deletionTimestamp": old, "finalizers": []any{"x"},
			"annotations": map[string]any{schema.AnnotationPaused: "true"}}, pausedReady, nil, false, isPaused},
		"Ready once resumed, a restart pending": {"condition=Ready", ann(schema.AnnotationRestartedAt), pausedReady, nil, false, resuming},
		"Ready once resumed, not yet reported":  {"condition=Ready", nil, pausedReady, nil, false, resuming},
		"Ready once resumed and reported":       {"condition=Ready", nil, pausedReady, active(nil), true, ""},
		"Paused once resumed":                   {"condition=Paused", ann(schema.AnnotationRestartedAt), pausedReady, nil, false, resuming},
		"Failed on an invalid spec with a start pending": {"phase=Failed", ann(schema.AnnotationStartRequestedAt),
			map[string]any{"phase": "Failed", "reason": "InvalidSpec", "observedGeneration": int64(1)}, nil, true, ""},
		"Failed on an invalid spec not yet observed": {"phase=Failed", map[string]any{"generation": int64(2)},
			map[string]any{"phase": "Failed", "reason": "InvalidSpec", "observedGeneration": int64(1)}, nil, false, yetToAct},
		"Terminating while being deleted": {"phase=Terminating", map[string]any{"deletionTimestamp": old, "finalizers": []any{"x"}},
			map[string]any{"phase": "Terminating", "reason": "ServerDeleting", "observedGeneration": int64(1)}, nil, true, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			v, dyn, out := waitClient(t, tc.metadata, tc.status, nil, nil)
			if tc.later != nil {
				go statusLater(dyn, v.gvr, tc.later, 100*time.Millisecond)
			}
			w, err := parseFor(tc.for_)
			if err != nil {
				t.Fatal(err)
			}
			err = v.wait(context.Background(), "vm1", w, tc.for_, 500*time.Millisecond, waitReachGrace)
			if tc.met && err != nil {
				t.Fatalf("wait: %v, want the condition met", err)
			}
			if !tc.met && (err == nil || !strings.Contains(err.Error(), "timed out")) {
				t.Fatalf("wait: %v, said %q; want it to wait for the controller and time out", err, out.String())
			}
			if tc.says != "" && !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("wait: %v; want the timeout to say %q", err, tc.says)
			}
		})
	}
}

// TestVerbRetriesOnConflict: a VM written between the verb's read and its conditional write
// (the usage poller and the controller write its status often) is read and decided on again,
// a few times, rather than failing the verb at the first conflict.
func TestVerbRetriesOnConflict(t *testing.T) {
	gvr := k8sschema.GroupVersionResource{Group: schema.Group, Version: "v1alpha1", Resource: "virtualmachines"}
	f, err := schema.ForVersion(gvr.GroupVersion())
	if err != nil {
		t.Fatal(err)
	}
	stoppedVM := map[string]any{"phase": "Inactive", "reason": "Stopped", "observedGeneration": int64(1)}
	runningVM := map[string]any{"phase": "Active", "reason": "ServerReady", "observedGeneration": int64(1)}
	tests := map[string]struct {
		conflicts int            // patches refused with a conflict before one goes through
		meanwhile map[string]any // the status written before the first conflict; nil: the same
		say       string         // in what the verb prints, or in its error
		written   bool           // whether the start request is on the VM afterwards
		fails     bool
	}{
		"one status write meanwhile":       {conflicts: 1, say: "start requested", written: true},
		"four status writes meanwhile":     {conflicts: 4, say: "start requested", written: true},
		"started meanwhile: decided again": {conflicts: 1, meanwhile: runningVM, say: "already running"},
		"changed at every try: gives up":   {conflicts: 100, say: `virtualmachine "vm1" changed while the verb looked at it, 5 times in a row; run it again`, fails: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cloudnative.czs/v1alpha1", "kind": "VirtualMachine",
				"metadata": map[string]any{"name": "vm1", "namespace": "ns", "resourceVersion": "1", "generation": int64(1)},
				"spec":     map[string]any{"action": "manual", "resource": map[string]any{"cpu": "1", "memory": "1Gi", "rootDisk": "1Gi"}},
				"status":   stoppedVM}}
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[k8sschema.GroupVersionResource]string{gvr: "VirtualMachineList"}, vm)
			patches := 0
			dyn.PrependReactor("patch", "virtualmachines", func(k8stesting.Action) (bool, runtime.Object, error) {
				if patches++; patches > tc.conflicts {
					return false, nil, nil
				}
				if tc.meanwhile != nil && patches == 1 {
					changed := vm.DeepCopy()
					changed.Object["status"] = tc.meanwhile
					if err := dyn.Tracker().Update(gvr, changed, "ns"); err != nil {
						t.Error(err)
					}
				}
				return true, nil, apierrors.NewConflict(gvr.GroupResource(), "vm1", errors.New("the object has been modified"))
			})
			v := &vmClient{vms: dyn.Resource(gvr).Namespace("ns"), kube: kubefake.NewClientset(), fields: f, gvr: gvr, namespace: "ns",
				out: &bytes.Buffer{}, now: func() time.Time { return pluginNow }}
			say, err := v.verb(context.Background(), "vm1", startVerb)
			if tc.fails {
				var ec cli.ExitCoder
				if !errors.As(err, &ec) || ec.ExitCode() != 1 || err.Error() != tc.say {
					t.Fatalf("err %v, want exit 1 saying %q", err, tc.say)
				}
				if patches > 5 {
					t.Errorf("%d writes, want at most 5", patches)
				}
				return
			}
			if err != nil || !strings.Contains(say, tc.say) {
				t.Fatalf("said %q, err %v; want %q", say, err, tc.say)
			}
			got, _ := dyn.Resource(gvr).Namespace("ns").Get(context.Background(), "vm1", metav1.GetOptions{})
			if _, ok := got.GetAnnotations()[schema.AnnotationStartRequestedAt]; ok != tc.written {
				t.Errorf("annotations %v, start request written: %v, want %v", got.GetAnnotations(), ok, tc.written)
			}
		})
	}
}

// statusLater writes status as vm1's in namespace ns after a while, as the controller would
// while a wait watches.
func statusLater(dyn dynamic.Interface, gvr k8sschema.GroupVersionResource, status map[string]any, after time.Duration) {
	time.Sleep(after)
	vms := dyn.Resource(gvr).Namespace("ns")
	u, err := vms.Get(context.Background(), "vm1", metav1.GetOptions{})
	if err != nil {
		return
	}
	u.Object["status"] = status
	vms.UpdateStatus(context.Background(), u, metav1.UpdateOptions{})
}

// TestPluginBadFlag: a verb's bad flag is one line and exit 2, as every command's, not the
// verb's help and exit 1: a script tells a typo from a refusal by it.
func TestPluginBadFlag(t *testing.T) {
	for _, args := range [][]string{{"stop", "vm1", "--bogus"}, {"stop", "vm1", "--grace-period", "abc"}, {"wait", "vm1", "--timeout", "5"},
		{"start", "--nope", "vm1"}, {"migrate", "vm1", "-x"}, {"start", "x", "--api-version", "cloudnative.czs/v9"},
		{"status", "x", "--api-version", "cloudnative.czs/v9"}, {"stop", "x", "--api-version", "cloudnative.czs/v9"}} {
		app := Plugin("test")
		var out bytes.Buffer
		app.Writer, app.ErrWriter = &out, &out
		err := app.Run(PluginArgs(append([]string{PluginName}, args...)))
		var ec cli.ExitCoder
		if !errors.As(err, &ec) || ec.ExitCode() != 2 || strings.Contains(err.Error(), "\n") || out.Len() != 0 {
			t.Errorf("%q: error %v, output %q; want one line and exit 2, no help", args, err, out.String())
		}
	}
}

// TestPluginHelpWithAName: a verb's --help (or -h) given with the VM's name and other flags,
// after or before them, is the verb's help, exit 0, as kubectl's `kubectl get pod x --help`.
func TestPluginHelpWithAName(t *testing.T) {
	for _, args := range [][]string{{"stop", "test-vm", "--help"}, {"stop", "-h", "test-vm"}, {"wait", "test-vm", "--for", "phase=Active", "--help"},
		{"status", "vm/test-vm", "-n", "team-a", "-h"}, {"migrate", "--help", "test-vm", "--kubeconfig", "/nonexistent/kubeconfig"}} {
		app := Plugin("test")
		var out bytes.Buffer
		app.Writer, app.ErrWriter = &out, &out
		err := app.Run(PluginArgs(append([]string{PluginName}, args...)))
		if err != nil || !strings.Contains(out.String(), "kubectl vm "+args[0]+" - ") || !strings.Contains(out.String(), "USAGE:") {
			t.Errorf("%q: error %v, output:\n%s\nwant the verb's help, exit 0", args, err, out.String())
		}
	}
}

// TestPluginFlagErrors: a flag no verb has is named as the unknown flag, with the verb's help
// to see, wherever it is given (before the verb it does not take the verb for its value); a
// verb's flags without a verb say that the verb is missing. One line, exit 2, before the
// cluster is asked anything.
func TestPluginFlagErrors(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"unknown flag before the verb":  {[]string{"--bogus", "status", "x"}, "unknown flag --bogus (see kubectl vm status --help)"},
		"unknown flag after the name":   {[]string{"stop", "x", "--bogus"}, "unknown flag --bogus (see kubectl vm stop --help)"},
		"unknown short flag":            {[]string{"migrate", "x", "-x"}, "unknown flag -x (see kubectl vm migrate --help)"},
		"unknown flag with a value":     {[]string{"start", "x", "--bogus=1"}, "unknown flag --bogus (see kubectl vm start --help)"},
		"another verb's flag":           {[]string{"stop", "x", "--for", "phase=Active"}, "unknown flag --for (see kubectl vm stop --help)"},
		"no verb":                       {[]string{"-n", "vms"}, "no verb given (kubectl vm VERB NAME: start, stop, restart, wait, status or migrate; see --help)"},
		"no verb, a flag without value": {[]string{"-n"}, "no verb given (kubectl vm VERB NAME: start, stop, restart, wait, status or migrate; see --help)"},
		"no verb, flags only":           {[]string{"--namespace=vms", "--context", "c1"}, "no verb given"},
		"unknown flag, no verb":         {[]string{"--bogus"}, "unknown flag --bogus (see kubectl vm --help)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			app := Plugin("test")
			var out bytes.Buffer
			app.Writer, app.ErrWriter = &out, &out
			args := []string{PluginName}
			if !strings.HasPrefix(name, "unknown flag, no verb") {
				// Where a verb would read it, it is not the user's; without a verb it would be
				// a verb's flag given, and the verb would be what is missing.
				args = append(args, "--kubeconfig=/nonexistent/kubeconfig")
			}
			err := app.Run(PluginArgs(append(args, tc.args...)))
			var ec cli.ExitCoder
			if !errors.As(err, &ec) || ec.ExitCode() != 2 || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") || out.Len() != 0 {
				t.Errorf("%q: error %v, output %q; want one line saying %q, exit 2", tc.args, err, out.String(), tc.want)
			}
		})
	}
}

// TestPluginResourceNotServed: a --resource the API server does not serve in the version is
// said naming --resource, the flag to fix, not --api-version.
func TestPluginResourceNotServed(t *testing.T) {
	s := newFakeAPIServer(t, k8sschema.GroupVersionResource{Group: schema.Group, Version: "v1alpha1", Resource: schema.DefaultResource}, nil)
	app := Plugin("test")
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	err := app.Run(PluginArgs([]string{PluginName, "status", "x", "--resource", "vmz", "--kubeconfig", s.kubeconfig(t)}))
	const want = `virtualmachine "x" not found in namespace "default": the API server serves no vmz in cloudnative.czs/v1alpha1 (--resource)`
	var ec cli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != 1 || err.Error() != want {
		t.Errorf("status x --resource vmz: %v, want exit 1 saying %q", err, want)
	}
}

// TestPluginSchemaFile: the verbs take a VM of another group with the field map the controller
// runs with (--schema-file, --resource), as the error for such a group says; without one they
// say so, before the cluster is asked anything.
func TestPluginSchemaFile(t *testing.T) {
	run := func(args ...string) error {
		app := Plugin("test")
		var out bytes.Buffer
		app.Writer, app.ErrWriter = &out, &out
		return app.Run(PluginArgs(append([]string{PluginName, "status", "m1", "--api-version", "compute.example.org/v1", "--resource", "machines",
			"--kubeconfig", "/nonexistent/kubeconfig"}, args...)))
	}
	if err := run("--schema-file", "../testdata/machines/fieldmap.yaml"); err == nil || !strings.Contains(err.Error(), "/nonexistent/kubeconfig") {
		t.Errorf("with the field map: %v, want it to get as far as the kubeconfig", err)
	}
	if err := run(); err == nil || !strings.Contains(err.Error(), "give one with --schema-file") {
		t.Errorf("without a field map: %v, want the field map asked for", err)
	}
}

// TestVMName: a verb's argument is NAME, or TYPE/NAME with TYPE a name kubectl takes for the
// resource the plugin is configured for (--api-version, --resource), with any version of its
// group, which it is then read through; another TYPE, or a version without a field map, is
// one line and exit 2.
func TestVMName(t *testing.T) {
	alpha := pluginConfig{resourceFlags: resourceFlags{APIVersion: schema.DefaultAPIVersion}}
	def := pluginConfig{resourceFlags: resourceFlags{APIVersion: "cloudnative.czs/v1beta1"}}
	mapped := pluginConfig{resourceFlags: resourceFlags{APIVersion: "cloudnative.czs/v1beta1", SchemaFile: "fieldmap.yaml"}}
	other := pluginConfig{resourceFlags: resourceFlags{APIVersion: "compute.example.org/v1", Resource: "machines"}}
	otherMapped := pluginConfig{resourceFlags: resourceFlags{APIVersion: "compute.example.org/v1", Resource: "machines", SchemaFile: "fieldmap.yaml"}}
	// A group whose first label looks like a version: machines.v1.example.org is its plural.group.
	dotted := pluginConfig{resourceFlags: resourceFlags{APIVersion: "v1.example.org/v2", Resource: "machines", SchemaFile: "fieldmap.yaml"}}
	tests := map[string]struct {
		c       pluginConfig
		arg     string
		name    string // "": refused
		version string // the version the VM is read through; "": --api-version's
		says    string // the refusal
	}{
		"NAME":                 {def, "test-vm", "test-vm", "", ""},
		"vm/":                  {def, "vm/test-vm", "test-vm", "", ""},
		"vms/":                 {def, "vms/test-vm", "test-vm", "", ""},
		"virtualmachine/":      {def, "virtualmachine/test-vm", "test-vm", "", ""},
		"virtualmachines/":     {def, "virtualmachines/test-vm", "test-vm", "", ""},
		"the kind":             {def, "VirtualMachine/test-vm", "test-vm", "", ""},
		"plural.group/":        {def, "virtualmachines.cloudnative.czs/test-vm", "test-vm", "", ""},
		"plural.version.group": {def, "virtualmachines.v1beta1.cloudnative.czs/test-vm", "test-vm", "", ""},
		"singular.group/":      {def, "virtualmachine.cloudnative.czs/test-vm", "test-vm", "", ""},

		"plural.version.group of another version":   {alpha, "virtualmachines.v1beta1.cloudnative.czs/test-vm", "test-vm", "v1beta1", ""},
		"singular.version.group of another version": {alpha, "virtualmachine.v1beta1.cloudnative.czs/test-vm", "test-vm", "v1beta1", ""},
		"short.version.group of another version":    {alpha, "vm.v1beta1.cloudnative.czs/test-vm", "test-vm", "v1beta1", ""},
		"the kind with another version, any case":   {alpha, "VirtualMachine.V1Beta1.CloudNative.CZS/test-vm", "test-vm", "v1beta1", ""},
		"v1 of a v1beta1 plugin":                    {def, "virtualmachines.v1.cloudnative.czs/x", "x", "v1", ""},
		"its own version":                           {alpha, "virtualmachines.v1alpha1.cloudnative.czs/test-vm", "test-vm", "", ""},
		"a version without a field map": {def, "virtualmachines.v9.cloudnative.czs/x", "",
			"", `argument "virtualmachines.v9.cloudnative.czs/x": no built-in field map for version "v9" of cloudnative.czs (built in: v1, v1alpha1, v1beta1)`},
		"another version with --schema-file": {mapped, "vm.v1.cloudnative.czs/x", "", "",
			`argument "vm.v1.cloudnative.czs/x": --schema-file maps cloudnative.czs/v1beta1 (--api-version), not v1: give the VM's NAME without a version, or --api-version cloudnative.czs/v1 with its field map`},
		"its own version with --schema-file": {mapped, "vm.v1beta1.cloudnative.czs/x", "x", "", ""},
		"an empty version":                   {def, "virtualmachines..cloudnative.czs/x", "", "", `argument "virtualmachines..cloudnative.czs/x": virtualmachines..cloudnative.czs is not a VM`},
		"an empty group":                     {def, "vm./x", "", "", `argument "vm./x": vm. is not a VM`},
		"an empty group, plural":             {def, "virtualmachines./x", "", "", "is not a VM"},

		"another kind": {def, "pod/x", "", "",
			`argument "pod/x": pod is not a VM (virtualmachines.cloudnative.czs): give the VM's NAME or vm/NAME`},
		"another kind with a version of the group": {def, "pods.v1beta1.cloudnative.czs/x", "", "", "is not a VM"},
		"another group": {def, "virtualmachines.kubevirt.io/x", "", "", "is not a VM"},
		"a version of another group": {def, "virtualmachines.v1.kubevirt.io/x", "", "",
			`argument "virtualmachines.v1.kubevirt.io/x": virtualmachines.v1.kubevirt.io is not a VM (virtualmachines.cloudnative.czs): give the VM's NAME or vm/NAME`},
		"no name":     {def, "vm/", "", "", `argument "vm/": want the VM's NAME or vm/NAME`},
		"two slashes": {def, "vm/a/b", "", "", `argument "vm/a/b": want the VM's NAME or vm/NAME`},

		"its own resource":          {other, "machines.compute.example.org/m1", "m1", "", ""},
		"its plural":                {other, "machines/m1", "m1", "", ""},
		"its own version elsewhere": {otherMapped, "machines.v1.compute.example.org/m1", "m1", "", ""},
		"another version elsewhere": {otherMapped, "machines.v2.compute.example.org/m1", "", "",
			`argument "machines.v2.compute.example.org/m1": --schema-file maps compute.example.org/v1 (--api-version), not v2: give the VM's NAME without a version, or --api-version compute.example.org/v2 with its field map`},
		"another version elsewhere, no map": {other, "machines.v2.compute.example.org/m1", "", "", `no built-in field map for group "compute.example.org"`},
		"a version of this project's group elsewhere": {otherMapped, "virtualmachines.v1beta1.cloudnative.czs/m1", "", "",
			`argument "virtualmachines.v1beta1.cloudnative.czs/m1": virtualmachines.v1beta1.cloudnative.czs is not a VM (machines.compute.example.org): give the VM's NAME or machines/NAME`},
		"its resource in another group":            {otherMapped, "machines.v1.example.org/m1", "", "", "is not a VM"},
		"not vm elsewhere":                         {other, "vm/m1", "", "", `argument "vm/m1": vm is not a VM (machines.compute.example.org): give the VM's NAME or machines/NAME`},
		"not vms elsewhere":                        {other, "virtualmachines/m1", "", "", "is not a VM"},
		"a group like a version":                   {dotted, "machines.v1.example.org/m1", "m1", "", ""},
		"a group like a version, with its version": {dotted, "machines.v2.v1.example.org/m1", "m1", "", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			configured, err := schema.ParseGVR(tc.c.APIVersion, tc.c.resource())
			if err != nil {
				t.Fatal(err)
			}
			got, err := tc.c.vmName(tc.arg)
			if tc.name != "" {
				want, from := configured, ""
				if tc.version != "" {
					want.Version, from = tc.version, fmt.Sprintf("argument %q", tc.arg)
				}
				if err != nil || got != (vmRef{name: tc.name, gvr: want, versionFrom: from}) {
					t.Fatalf("vmName(%q) = %+v, %v; want %q in %s (from %q)", tc.arg, got, err, tc.name, want, from)
				}
				return
			}
			var ec cli.ExitCoder
			if !errors.As(err, &ec) || ec.ExitCode() != 2 || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("vmName(%q) = %+v, %v; want exit 2 saying %q", tc.arg, got, err, tc.says)
			}
		})
	}
}

// TestVMNameTakesTheCRDsNames: every name the CRD gives the resource (plural, singular, short
// names, kind), as kubectl takes them, is a TYPE the verbs take.
func TestVMNameTakesTheCRDsNames(t *testing.T) {
	all, err := crds.YAML()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, doc := range strings.Split(string(all), "\n---\n") {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal([]byte(doc), &crd); err != nil {
			t.Fatal(err)
		}
		if crd.Name == crds.DefaultName {
			n := crd.Spec.Names
			names = append(append(names, n.Plural, n.Singular, n.Kind), n.ShortNames...)
		}
	}
	if len(names) == 0 {
		t.Fatalf("no CRD %s", crds.DefaultName)
	}
	c := pluginConfig{resourceFlags: resourceFlags{APIVersion: schema.DefaultAPIVersion}}
	for _, n := range names {
		if got, err := c.vmName(n + "/x"); err != nil || got.name != "x" {
			t.Errorf("vmName(%q) = %+v, %v; want x", n+"/x", got, err)
		}
	}
}

// TestPluginRefusesAnotherKind: a TYPE/NAME of another kind is refused before the kubeconfig
// is read, and -nNS is the namespace.
func TestPluginRefusesAnotherKind(t *testing.T) {
	run := func(args ...string) error {
		app := Plugin("test")
		var out bytes.Buffer
		app.Writer, app.ErrWriter = &out, &out
		return app.Run(PluginArgs(append([]string{PluginName}, append(args, "--kubeconfig", "/nonexistent/kubeconfig")...)))
	}
	for _, verb := range []string{"start", "stop", "restart", "status", "migrate"} {
		err := run(verb, "pod/x")
		var ec cli.ExitCoder
		if !errors.As(err, &ec) || ec.ExitCode() != 2 || !strings.Contains(err.Error(), `argument "pod/x": pod is not a VM`) {
			t.Errorf("%s pod/x: %v, want exit 2 before the kubeconfig is read", verb, err)
		}
	}
	if err := run("wait", "pod/x", "--for=phase=Active"); err == nil || !strings.Contains(err.Error(), "pod is not a VM") {
		t.Errorf("wait pod/x: %v, want it refused", err)
	}
	if err := run("status", "vm/x", "-nteam-b"); err == nil || !strings.Contains(err.Error(), "/nonexistent/kubeconfig") {
		t.Errorf("status vm/x -nteam-b: %v, want it to get as far as the kubeconfig", err)
	}
}

// TestPluginNamedVersion: a TYPE/NAME with a version of the VM's group is read
// through that version, as kubectl reads it, whatever --api-version says; a version the API
// server does not serve is one line that names the argument, as --api-version's names the flag.
func TestPluginNamedVersion(t *testing.T) {
	tests := map[string]struct {
		served string // the version the API server serves
		arg    string
		read   string // the version the VM is read through
		want   string // the line; the VM does not exist
	}{
		"v1beta1, served": {"v1beta1", "virtualmachines.v1beta1.cloudnative.czs/x", "v1beta1",
			`virtualmachine "x" not found in namespace "default"`},
		"v1, not served": {"v1alpha1", "vm.v1.cloudnative.czs/x", "v1",
			`virtualmachine "x" not found in namespace "default": the API server does not serve cloudnative.czs/v1 (argument "vm.v1.cloudnative.czs/x")`},
		"--api-version's, not served": {"v1beta1", "vm/x", "v1alpha1",
			`virtualmachine "x" not found in namespace "default": the API server does not serve cloudnative.czs/v1alpha1 (--api-version)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newFakeAPIServer(t, k8sschema.GroupVersionResource{Group: schema.Group, Version: tc.served, Resource: schema.DefaultResource}, nil)
			app := Plugin("test")
			var out bytes.Buffer
			app.Writer, app.ErrWriter = &out, &out
			err := app.Run(PluginArgs([]string{PluginName, "status", tc.arg, "--kubeconfig", s.kubeconfig(t)}))
			var ec cli.ExitCoder
			if !errors.As(err, &ec) || ec.ExitCode() != 1 || err.Error() != tc.want {
				t.Errorf("status %s: %v, want exit 1 saying %q", tc.arg, err, tc.want)
			}
			read := "GET /apis/" + schema.Group + "/" + tc.read + "/namespaces/default/virtualmachines/x"
			if s.count(read) != 1 {
				t.Errorf("status %s: requests %q, want one %s", tc.arg, s.requests, read)
			}
		})
	}
}

// TestWriteStatus: status prints a field per line, its values aligned with spaces (no tab,
// the empty conditions included), then the conditions as a table.
func TestWriteStatus(t *testing.T) {
	tests := map[string]struct {
		status map[string]any
		want   string
	}{
		"no conditions": {map[string]any{"phase": "Inactive", "reason": "Stopped"}, `Name:          vm1
Namespace:     ns
Run strategy:  Manual
Phase:         Inactive
Reason:        Stopped
Message:       <none>
Server:        <none>
Node:          <none>
IP:            <none>
Disk:          <none>
Conditions:    <none>
`},
		"conditions": {map[string]any{"phase": "Active", "reason": "ServerReady", "server": map[string]any{"name": "vm1-server", "id": "u", "state": "Running"},
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "ServerReady", "message": "up", "lastTransitionTime": "2026-06-01T10:00:00Z"}}}, `Name:          vm1
Namespace:     ns
Run strategy:  Manual
Phase:         Active
Reason:        ServerReady
Message:       <none>
Server:        vm1-server (Running)
Node:          node-a
IP:            10.0.0.7
Disk:          <none>
Conditions:
  Type   Status  Reason       Message
  Ready  True    ServerReady  up
`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm, _ := requestVM(t, "Manual", tc.status, nil)
			var at serverPlace
			if tc.status["server"] != nil {
				at = serverPlace{node: "node-a", ip: "10.0.0.7"}
			}
			var out bytes.Buffer
			writeStatus(&out, vm, "ns", at)
			if out.String() != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", out.String(), tc.want)
			}
		})
	}
}

// TestWaitVMDeleted: a VM deleted while wait waits for it (gone, not only being deleted) ends
// wait at once, exit 1, with one line naming the VM, what was waited for and the VM as last
// seen, as docs/run-strategies.md and docs/reference/bad-input.md quote it
// (TestPluginDocsQuoteThePlugin), in the one watch that saw it go.
func TestWaitVMDeleted(t *testing.T) {
	err, watches := waitDeleted(t, "vm1", "phase=Inactive")
	const want = `virtualmachine "vm1" was deleted while waiting for phase=Inactive; last seen: phase Terminating (ServerDeleting): Deleting server vm1-server`
	var ec cli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != 1 || err.Error() != want {
		t.Fatalf("wait: %v, want exit 1 saying %q", err, want)
	}
	if watches != 1 {
		t.Errorf("%d watches, want the one that saw the VM go", watches)
	}
}

// waitDeleted is wait for what (not phase Creating), on a Creating VM name whose watch shows it
// Terminating and then deleted: wait's error, and the watches it made.
func waitDeleted(t *testing.T, name, what string) (err error, watches int) {
	terminating := func(rv string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cloudnative.czs/v1alpha1", "kind": "VirtualMachine",
			"metadata": map[string]any{"name": name, "namespace": "ns", "resourceVersion": rv, "generation": int64(1), "deletionTimestamp": "2026-11-28T06:00:00Z"},
			"spec":     map[string]any{"action": "active"},
			"status":   map[string]any{"phase": "Terminating", "reason": "ServerDeleting", "message": "Deleting server " + name + "-server", "observedGeneration": int64(1)}}}
	}
	react := func(k8stesting.Action) (bool, watch.Interface, error) {
		watches++
		w := watch.NewRaceFreeFake()
		w.Modify(terminating("2"))
		w.Delete(terminating("3"))
		return true, w, nil
	}
	v, _, _ := waitClient(t, map[string]any{"name": name}, map[string]any{"phase": "Creating", "reason": "ServerStarting", "observedGeneration": int64(1)}, nil, react)
	w, perr := parseFor(what)
	if perr != nil {
		t.Fatal(perr)
	}
	// Past the timeout, wait says it timed out: a wait that went on after the VM went.
	return v.wait(context.Background(), name, w, what, 5*time.Second, waitReachGrace), watches
}
