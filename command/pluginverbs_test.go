package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// The verbs as the plugin runs them told no flags (verbs): the commands their messages give
// name the VM as the controller's messages do, by its name and namespace.
var (
	startVerb   = verbs{}.start
	stopVerb    = verbs{}.stop
	restartVerb = verbs{}.restart
)

// refused reports whether err is a verb's refusal, exit 1, saying each of says.
func refused(err error, says ...string) bool {
	var ec cli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != 1 {
		return false
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			return false
		}
	}
	return true
}

// TestStopRefusesGraceOnLostNode: while the status says the server's node does not answer
// (NodeLost, whatever the phase), stop refuses --force and --grace-period under every run
// strategy, paused or not, writing nothing, and points to the way out for a node down for
// good: a deletion with a grace period of 0 removes the pod at once while the guest may still
// run there with the disk, and a new server elsewhere would write the same disk. A plain stop
// is what it was.
func TestStopRefusesGraceOnLostNode(t *testing.T) {
	zero, thirty := int64(0), int64(30)
	server := map[string]any{"name": "vm1-server", "id": "pod-uid", "state": "Running", "node": "node-a"}
	for _, rs := range []string{"Always", "RerunOnFailure", "Once", "Manual", "Halted"} {
		for _, phase := range []string{"Unknown", "Creating", "Inactive", "Terminating"} {
			for _, paused := range []bool{false, true} {
				var ann map[string]any
				if paused {
					ann = map[string]any{schema.AnnotationPaused: "true"}
				}
				status := map[string]any{"phase": phase, "reason": "NodeLost", "server": server,
					"message": "Server vm1-server: its node node-a does not answer (node node-a is not ready)"}
				vm, f := requestVM(t, rs, status, ann)
				for _, grace := range []*int64{&zero, &thirty} {
					r, err := stopVerb(vm, f, pluginNow, grace)
					if !refused(err, "does not answer", "kubectl delete node node-a", "placement.md") || r.patch != nil {
						t.Errorf("%s, %s, paused %v, grace %d: patch %s, error %v; want exit 1 naming the way out, nothing written",
							rs, phase, paused, *grace, patchText(r), err)
					}
				}
				if _, err := stopVerb(vm, f, pluginNow, nil); err != nil {
					t.Errorf("%s, %s, paused %v: plain stop: %v, want it as before", rs, phase, paused, err)
				}
			}
		}
	}
	// A layout without the server's node: the message names the node as the status does.
	vm, f := requestVM(t, "Manual", map[string]any{"phase": "Unknown", "reason": "NodeLost",
		"server": map[string]any{"name": "vm1-server", "id": "pod-uid", "state": "Running"}}, nil)
	if _, err := stopVerb(vm, f, pluginNow, &zero); !refused(err, "kubectl delete node NODE") {
		t.Errorf("no node in the status: %v, want the command with NODE", err)
	}
}

// withoutFields is a v1 VM named vm1 under rs, with the status and annotations given, read
// with a layout (a field map) without the status fields of keys.
func withoutFields(t *testing.T, rs string, status, ann map[string]any, keys ...string) (schema.VirtualMachine, schema.Fields) {
	t.Helper()
	return namedWithout(t, "vm1", rs, status, ann, keys...)
}

// namedWithout is withoutFields' VM, named name.
func namedWithout(t *testing.T, name, rs string, status, ann map[string]any, keys ...string) (schema.VirtualMachine, schema.Fields) {
	t.Helper()
	_, f := requestVM(t, rs, nil, nil)
	without := map[string]bool{}
	for _, k := range keys {
		without[k] = true
	}
	f, left := f.Without(without)
	if len(left) != len(keys) {
		t.Fatalf("the layout left out %v, want %v", left, keys)
	}
	obj := map[string]any{"apiVersion": "cloudnative.czs/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": name, "namespace": "ns", "annotations": ann},
		"spec":     map[string]any{"runStrategy": rs, "resources": map[string]any{"requests": map[string]any{"cpu": 1, "memory": "1Gi"}}, "rootDisk": map[string]any{"size": "1Gi"}},
		"status":   status}
	raw, _ := json.Marshal(obj)
	return schema.ViewOf(raw, "1", f), f
}

// TestVerbsNeedTheRequestFields: on a layout without the status field that records the
// request a verb would write (a field map of another CRD may give a run strategy's word
// without status.startRequestedAt, status.stopRequestedAt or status.restartedAt), the
// controller ignores the annotation; the verb refuses, exit 1, naming the field, and writes
// nothing, rather than report a request that nothing carries out. A verb that changes the spec
// (Halted <-> Always), or writes nothing, is what it was.
func TestVerbsNeedTheRequestFields(t *testing.T) {
	zero := int64(0)
	running := map[string]any{"phase": "Active", "reason": "ServerReady", "server": map[string]any{"name": "vm1-server", "id": "u", "state": "Running"}}
	stoppedVM := map[string]any{"phase": "Inactive", "reason": "NotStarted"}
	requests := []string{"status.startRequestedAt", "status.stopRequestedAt", "status.restartedAt"}
	tests := map[string]struct {
		verb, rs string
		status   map[string]any
		grace    *int64
		without  []string
		refusal  string // the field the refusal names; "": the verb goes on as before
		unsaid   string // not in what the verb says: a hint at a verb that would be refused
	}{
		"start under Manual":         {verb: "start", rs: "Manual", status: stoppedVM, without: requests, refusal: "status.startRequestedAt"},
		"start under Once":           {verb: "start", rs: "Once", status: map[string]any{"phase": "Failed", "reason": "ServerFailed"}, without: requests, refusal: "status.startRequestedAt"},
		"start, no start field only": {verb: "start", rs: "Manual", status: stoppedVM, without: []string{"status.startRequestedAt"}, refusal: "status.startRequestedAt"},
		"stop under RerunOnFailure":  {verb: "stop", rs: "RerunOnFailure", status: running, without: requests, refusal: "status.stopRequestedAt"},
		"stop, no stop field only":   {verb: "stop", rs: "Manual", status: running, without: []string{"status.stopRequestedAt"}, refusal: "status.stopRequestedAt"},
		"stop --force, Halted": {verb: "stop", rs: "Halted", grace: &zero, without: requests, refusal: "status.stopRequestedAt",
			status: map[string]any{"phase": "Inactive", "reason": "ServerStopping", "server": map[string]any{"name": "vm1-server", "id": "u", "state": "Running"}}},
		"restart under Always": {verb: "restart", rs: "Always", status: running, without: requests, refusal: "status.restartedAt"},
		"restart under Manual": {verb: "restart", rs: "Manual", status: running, without: []string{"status.restartedAt"}, refusal: "status.restartedAt"},
		"stop, Halted, stopping: no hint at --force": {verb: "stop", rs: "Halted", without: requests, unsaid: "--force",
			status: map[string]any{"phase": "Inactive", "reason": "ServerStopping", "server": map[string]any{"name": "vm1-server", "id": "u", "state": "Running"}}},
		"start on Halted: the spec": {verb: "start", rs: "Halted", status: stoppedVM, without: requests},
		"stop on Always: the spec":  {verb: "stop", rs: "Always", status: running, grace: &zero, without: requests},
		"start of a running VM":     {verb: "start", rs: "Manual", status: running, without: requests},
		"stop with the stop field":  {verb: "stop", rs: "Manual", status: running, without: []string{"status.startRequestedAt", "status.restartedAt"}},
		"restart with its field":    {verb: "restart", rs: "Manual", status: running, without: []string{"status.startRequestedAt", "status.stopRequestedAt"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm, f := withoutFields(t, tc.rs, tc.status, nil, tc.without...)
			r, err := decideVerb(tc.verb, vm, f, tc.grace)
			if tc.refusal == "" {
				if err != nil {
					t.Fatalf("%v, want the verb as before", err)
				}
				if tc.unsaid != "" && strings.Contains(r.say, tc.unsaid) {
					t.Errorf("says %q, which points at a verb the layout refuses", r.say)
				}
				return
			}
			if !refused(err, "field map has no "+tc.refusal) || r.patch != nil {
				t.Fatalf("patch %s, say %q, error %v; want exit 1 naming %s, nothing written", patchText(r), r.say, err, tc.refusal)
			}
		})
	}
}

// TestMigrateNeedsTheMigrationField: migrate on a layout without status.migration, where the
// controller ignores the migration annotation, is refused before anything else is read, and
// nothing is written.
func TestMigrateNeedsTheMigrationField(t *testing.T) {
	gvr := k8sschema.GroupVersionResource{Group: schema.Group, Version: "v1alpha1", Resource: "virtualmachines"}
	f, err := schema.ForVersion(gvr.GroupVersion())
	if err != nil {
		t.Fatal(err)
	}
	f, _ = f.Without(map[string]bool{"status.migration": true})
	vm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cloudnative.czs/v1alpha1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "vm1", "namespace": "ns", "resourceVersion": "1"},
		"spec":     map[string]any{"action": "active", "resource": map[string]any{"cpu": "1", "memory": "1Gi", "rootDisk": "1Gi"}},
		"status":   map[string]any{"phase": "Active", "reason": "ServerReady", "server": map[string]any{"name": "vm1-server", "id": "u", "state": "Running"}}}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[k8sschema.GroupVersionResource]string{gvr: "VirtualMachineList"}, vm)
	kube := kubefake.NewClientset()
	v := &vmClient{vms: dyn.Resource(gvr).Namespace("ns"), kube: kube, fields: f, gvr: gvr, namespace: "ns",
		out: &bytes.Buffer{}, now: func() time.Time { return pluginNow }}
	if err := v.migrate(context.Background(), "vm1", nil); !refused(err, "field map has no status.migration") {
		t.Errorf("migrate: %v, want it refused for want of status.migration", err)
	}
	if n := len(kube.Actions()); n != 0 {
		t.Errorf("%d reads of the cluster, want none", n)
	}
	for _, a := range dyn.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("%s of the VM, want a read only", a.GetVerb())
		}
	}
}

// TestVerbWithTheSchemaFilesLayout: the verb decides with the layout the plugin reads the VM
// with, --schema-file's: a start on a VM whose map has a word for Manual and no
// status.startRequestedAt is refused, and the VM is left as it was.
func TestVerbWithTheSchemaFilesLayout(t *testing.T) {
	builtin, err := os.ReadFile(filepath.Join("..", "schema", "fieldmaps", "v1alpha1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.Split(string(builtin), "\n") {
		if !strings.Contains(line, "RequestedAt:") {
			kept = append(kept, line)
		}
	}
	file := filepath.Join(t.TempDir(), "fieldmap.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(kept, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	gvr := k8sschema.GroupVersionResource{Group: schema.Group, Version: "v1alpha1", Resource: "virtualmachines"}
	f, err := loadFields(file, gvr.GroupVersion())
	if err != nil {
		t.Fatal(err)
	}
	vm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cloudnative.czs/v1alpha1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "vm1", "namespace": "ns", "resourceVersion": "1"},
		"spec":     map[string]any{"action": "manual", "resource": map[string]any{"cpu": "1", "memory": "1Gi", "rootDisk": "1Gi"}},
		"status":   map[string]any{"phase": "Inactive", "reason": "NotStarted"}}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[k8sschema.GroupVersionResource]string{gvr: "VirtualMachineList"}, vm)
	v := &vmClient{vms: dyn.Resource(gvr).Namespace("ns"), kube: kubefake.NewClientset(), fields: f, gvr: gvr, namespace: "ns",
		out: &bytes.Buffer{}, now: func() time.Time { return pluginNow }}
	if say, err := v.verb(context.Background(), "vm1", startVerb); !refused(err, "status.startRequestedAt") {
		t.Errorf("said %q, error %v; want the start refused for want of status.startRequestedAt", say, err)
	}
	got, err := dyn.Resource(gvr).Namespace("ns").Get(context.Background(), "vm1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ann := got.GetAnnotations(); len(ann) != 0 {
		t.Errorf("annotations %v written", ann)
	}
}

// TestStoppedByServerAndStrategy: whether a VM is stopped is read from whether its status
// names a server that still runs, and from what its run strategy does with a failed one, not
// from the phase alone. A RerunOnFailure VM whose server failed waits for its replacement
// whether or not its layout has status.nextRetryTime to say when, and a restart replaces the
// failed server at once; a server whose deletion was refused (ServerDeleteRefused) still runs,
// so the VM it runs for is not stopped, and restart is not refused.
func TestStoppedByServerAndStrategy(t *testing.T) {
	at := pluginNow.Format(requestTimeLayout)
	live := map[string]any{"name": "vm1-server", "id": "u", "state": "Running"}
	failedServer := map[string]any{"name": "vm1-server", "id": "u", "state": "Failed"}
	retry := "2026-06-01T12:05:00Z"
	tests := map[string]struct {
		rs      string
		status  map[string]any
		without []string // status fields the layout lacks
		stopped bool
	}{
		"RerunOnFailure, failed, no nextRetryTime in the layout": {rs: "RerunOnFailure", without: []string{"status.nextRetryTime"},
			status: map[string]any{"phase": "Failed", "reason": "ServerFailed", "server": failedServer, "nextRetryTime": retry}},
		"RerunOnFailure, failed server deleted, no nextRetryTime in the layout": {rs: "RerunOnFailure", without: []string{"status.nextRetryTime"},
			status: map[string]any{"phase": "Failed", "reason": "ServerFailed"}},
		"RerunOnFailure, failed, recorded without a time": {rs: "RerunOnFailure",
			status: map[string]any{"phase": "Failed", "reason": "ServerFailed", "server": failedServer}},
		"RerunOnFailure, failed, waiting out the backoff": {rs: "RerunOnFailure",
			status: map[string]any{"phase": "Failed", "reason": "ServerFailed", "server": failedServer, "nextRetryTime": retry}},
		"Manual, a restart's delete refused": {rs: "Manual",
			status: map[string]any{"phase": "Failed", "reason": "ServerDeleteRefused", "server": live}},
		"Once, a stop's delete refused": {rs: "Once",
			status: map[string]any{"phase": "Failed", "reason": "ServerDeleteRefused", "server": live}},
		"Manual, invalid spec beside a running server": {rs: "Manual",
			status: map[string]any{"phase": "Failed", "reason": "InvalidSpec", "server": live}},
		"Manual, disk conflict beside a running server": {rs: "Manual",
			status: map[string]any{"phase": "Failed", "reason": "DiskConflict", "server": live}},
		"Manual, invalid spec on its way, no server":  {rs: "Manual", status: map[string]any{"phase": "Failed", "reason": "InvalidSpec"}},
		"Manual, disk conflict on its way, no server": {rs: "Manual", status: map[string]any{"phase": "Failed", "reason": "DiskConflict"}},
		"Manual, server refused":                      {rs: "Manual", status: map[string]any{"phase": "Failed", "reason": "ServerRejected"}},
		"Manual, disk refused":                        {rs: "Manual", status: map[string]any{"phase": "Failed", "reason": "DiskRejected"}},
		"Manual, running":                             {rs: "Manual", status: map[string]any{"phase": "Active", "reason": "ServerReady", "server": live}},
		"Manual, lost node":                           {rs: "Manual", status: map[string]any{"phase": "Unknown", "reason": "NodeLost", "server": live}},
		"Manual, being deleted":                       {rs: "Manual", status: map[string]any{"phase": "Terminating", "reason": "ServerDeleting", "server": live}},
		"RerunOnFailure, no phase yet":                {rs: "RerunOnFailure", status: map[string]any{}},

		"Manual, no phase yet": {rs: "Manual", status: map[string]any{}, stopped: true},
		"Manual, invalid spec, its server deleted by a stop": {rs: "Manual", stopped: true, status: map[string]any{"phase": "Failed", "reason": "InvalidSpec", "server": live,
			"conditions": []any{map[string]any{"type": "RefusedWhileStopped", "status": "True", "reason": "Stopping", "message": "Waiting for server vm1-server to be deleted"}}}},
		"Once, shut down, server kept, then its spec refused": {rs: "Once", stopped: true, status: map[string]any{"phase": "Failed", "reason": "InvalidSpec", "server": live,
			"conditions": []any{map[string]any{"type": "RefusedWhileStopped", "status": "True", "reason": "GuestShutDown", "message": "Server vm1-server shut down cleanly"}}}},
		"Manual, stopped, then its disk refused": {rs: "Manual", stopped: true, status: map[string]any{"phase": "Failed", "reason": "DiskRejected",
			"conditions": []any{map[string]any{"type": "RefusedWhileStopped", "status": "True", "reason": "Stopped", "message": "Stopped on request"}}}},
		"RerunOnFailure, failed, a record of a stop left by another version": {rs: "RerunOnFailure", status: map[string]any{"phase": "Failed", "reason": "ServerFailed",
			"conditions": []any{map[string]any{"type": "RefusedWhileStopped", "status": "True", "reason": "Stopped", "message": "Stopped on request"}}}},
		"Once, stopped, then its start's server refused": {rs: "Once", stopped: true, status: map[string]any{"phase": "Failed", "reason": "ServerRejected",
			"conditions": []any{map[string]any{"type": "RefusedWhileStopped", "status": "True", "reason": "GuestShutDown", "message": "The guest shut down"}}}},
		"Once, failed, server kept": {rs: "Once", stopped: true,
			status: map[string]any{"phase": "Failed", "reason": "ServerFailed", "server": failedServer}},
		"Once, failed, kept running by a sidecar": {rs: "Once", stopped: true,
			status: map[string]any{"phase": "Failed", "reason": "ServerFailed", "server": live}},
		"Manual, failed, no server": {rs: "Manual", stopped: true, status: map[string]any{"phase": "Failed", "reason": "ServerFailed"}},
		"Manual, a new VM's invalid spec, no server": {rs: "Manual", stopped: true, status: map[string]any{"phase": "Failed", "reason": "InvalidSpec",
			"conditions": []any{map[string]any{"type": "RefusedWhileStopped", "status": "True", "reason": "NotStarted", "message": "Not started"}}}},
		"Manual, a delete refused, no server named": {rs: "Manual", stopped: true,
			status: map[string]any{"phase": "Failed", "reason": "ServerDeleteRefused"}},
		"RerunOnFailure, shut down, server kept": {rs: "RerunOnFailure", stopped: true,
			status: map[string]any{"phase": "Inactive", "reason": "GuestShutDown", "server": live}},
		"Manual, stopping": {rs: "Manual", stopped: true, status: map[string]any{"phase": "Inactive", "reason": "Stopping", "server": live}},
		"Manual, stop waits on a lost node": {rs: "Manual", stopped: true,
			status: map[string]any{"phase": "Inactive", "reason": "NodeLost", "server": live}},
		"Manual, stopped": {rs: "Manual", stopped: true, status: map[string]any{"phase": "Inactive", "reason": "Stopped"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm, f := withoutFields(t, tc.rs, tc.status, nil, tc.without...)
			if got := stopped(schema.RunStrategy(tc.rs), vm.Status()); got != tc.stopped {
				t.Fatalf("stopped %v, want %v", got, tc.stopped)
			}
			r, err := restartVerb(vm, f, pluginNow)
			switch {
			case tc.stopped && !refused(err, "nothing to restart"):
				t.Errorf("restart: patch %s, error %v; want it refused as stopped", patchText(r), err)
			case !tc.stopped && (err != nil || patchText(r) != `{"metadata":{"annotations":{"cloudnative.czs/restartedAt":"`+at+`"}}}`):
				t.Errorf("restart: patch %s, error %v; want the restart requested", patchText(r), err)
			}
		})
	}
}

// deletingVM is a v1 VM named vm1 under rs, with the status given, being deleted (its
// deletionTimestamp set; the controller's finalizer holds it until its server is gone).
func deletingVM(t *testing.T, rs string, status, ann map[string]any) (schema.VirtualMachine, schema.Fields) {
	t.Helper()
	_, f := requestVM(t, rs, nil, nil)
	obj := map[string]any{"apiVersion": "cloudnative.czs/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "vm1", "namespace": "ns", "annotations": ann,
			"deletionTimestamp": "2026-06-01T11:59:00Z", "finalizers": []any{schema.Finalizer}},
		"spec":   map[string]any{"runStrategy": rs, "resources": map[string]any{"requests": map[string]any{"cpu": 1, "memory": "1Gi"}}, "rootDisk": map[string]any{"size": "1Gi"}},
		"status": status}
	raw, _ := json.Marshal(obj)
	return schema.ViewOf(raw, "1", f), f
}

// TestVerbsRefuseADeletingVM: of a VM being deleted the controller carries out no request and
// no change of its run strategy (it deletes the server and lets the VM go), so every verb that
// writes refuses it, exit 1, nothing written, under every strategy and in any status (the
// controller may not have written Terminating yet), paused or not: a write would be reported
// as done and never happen.
func TestVerbsRefuseADeletingVM(t *testing.T) {
	zero := int64(0)
	server := map[string]any{"name": "vm1-server", "id": "pod-uid", "state": "Running"}
	statuses := map[string]map[string]any{
		"terminating": {"phase": "Terminating", "reason": "ServerDeleting", "server": server,
			"message": "Waiting for server vm1-server to be deleted before the VM is removed"},
		"active, not yet reported": {"phase": "Active", "reason": "ServerReady", "server": server},
		"stopped":                  {"phase": "Inactive", "reason": "Stopped"},
		"failed":                   {"phase": "Failed", "reason": "ServerFailed", "server": map[string]any{"name": "vm1-server", "id": "pod-uid", "state": "Failed"}},
	}
	for _, rs := range []string{"Always", "RerunOnFailure", "Once", "Manual", "Halted"} {
		for sn, status := range statuses {
			for _, paused := range []bool{false, true} {
				var ann map[string]any
				if paused {
					ann = map[string]any{schema.AnnotationPaused: "true"}
				}
				vm, f := deletingVM(t, rs, status, ann)
				for _, verb := range []string{"start", "stop", "stop --force", "restart"} {
					var r verbResult
					var err error
					switch verb {
					case "stop --force":
						r, err = stopVerb(vm, f, pluginNow, &zero)
					default:
						r, err = decideVerb(verb, vm, f, nil)
					}
					if !refused(err, "virtualmachine/vm1 is being deleted", "nothing written") || r.patch != nil {
						t.Errorf("%s, %s, %s, paused %v: patch %s, say %q, error %v; want exit 1 saying it is being deleted, nothing written",
							verb, rs, sn, paused, patchText(r), r.say, err)
					}
				}
				_, err := (&vmClient{namespace: "ns"}).migrationSource(context.Background(), vm, nil)
				if !refused(err, "virtualmachine/vm1 is being deleted", "nothing written") {
					t.Errorf("migrate, %s, %s, paused %v: %v; want exit 1 saying it is being deleted", rs, sn, paused, err)
				}
			}
		}
	}
}

// TestVerbOnADeletingVMWritesNothing: the refusal of a VM being deleted, through the verb's
// read and write on a fake API server: exit 1, and no patch sent.
func TestVerbOnADeletingVMWritesNothing(t *testing.T) {
	gvr := k8sschema.GroupVersionResource{Group: schema.Group, Version: "v1alpha1", Resource: "virtualmachines"}
	f, err := schema.ForVersion(gvr.GroupVersion())
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"start", "stop", "restart", "migrate"} {
		vm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cloudnative.czs/v1alpha1", "kind": "VirtualMachine",
			"metadata": map[string]any{"name": "vm1", "namespace": "ns", "resourceVersion": "1",
				"deletionTimestamp": "2026-06-01T11:59:00Z", "finalizers": []any{schema.Finalizer}},
			"spec": map[string]any{"action": "manual", "resource": map[string]any{"cpu": "1", "memory": "1Gi", "rootDisk": "1Gi"}},
			"status": map[string]any{"phase": "Terminating", "reason": "ServerDeleting",
				"server": map[string]any{"name": "vm1-server", "id": "u", "state": "Running"}}}}
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[k8sschema.GroupVersionResource]string{gvr: "VirtualMachineList"}, vm)
		var out bytes.Buffer
		v := &vmClient{vms: dyn.Resource(gvr).Namespace("ns"), kube: kubefake.NewClientset(), fields: f, gvr: gvr,
			namespace: "ns", out: &out, now: func() time.Time { return pluginNow }}
		switch verb {
		case "start":
			_, err = v.verb(context.Background(), "vm1", startVerb)
		case "stop":
			_, err = v.verb(context.Background(), "vm1", stopWithoutGrace)
		case "restart":
			_, err = v.verb(context.Background(), "vm1", restartVerb)
		case "migrate":
			err = v.migrate(context.Background(), "vm1", nil)
		}
		if !refused(err, "is being deleted") {
			t.Errorf("%s: %v, want exit 1 saying the VM is being deleted", verb, err)
		}
		for _, a := range dyn.Actions() {
			if a.GetVerb() != "get" {
				t.Errorf("%s: %s sent, want only the read", verb, a.GetVerb())
			}
		}
	}
}

// TestStartOfAVMWaitingForAServer: start of a VM that has no server and is on its way to one
// (RerunOnFailure after a failure, waiting out its backoff; any strategy but Halted after its
// server's or disk's create was refused) says that it is not running and what the controller
// does next, not that it runs: a new server at the status's next retry time (or after the
// backoff, when the layout has no time to say), or at once on a restart; a refused create
// asked for again every minute, which runs once the cause the message names is fixed.
// Nothing is written, exit 0.
func TestStartOfAVMWaitingForAServer(t *testing.T) {
	failedServer := map[string]any{"name": "vm1-server", "id": "u", "state": "Failed"}
	failedMsg := "Server vm1-server failed (Error, exit code 1); a new server will be created at 2026-06-01T12:00:40Z"
	refusedMsg := `The server was refused: pods "vm1-server" is forbidden: exceeded quota: compute`
	tests := map[string]struct {
		rs      string
		status  map[string]any
		without []string // status fields the layout lacks
		say     string
	}{
		"RerunOnFailure, failed, waiting out the backoff": {rs: "RerunOnFailure",
			status: map[string]any{"phase": "Failed", "reason": "ServerFailed", "message": failedMsg, "server": failedServer, "nextRetryTime": "2026-06-01T12:00:40Z"},
			say: "virtualmachine/vm1 is not running: its server failed (phase Failed (ServerFailed)); runStrategy RerunOnFailure makes a new one at 2026-06-01T12:00:40Z, " +
				"after the backoff, or at once on a restart (kubectl vm restart vm1 -n ns): nothing changed"},
		"RerunOnFailure, failed, no nextRetryTime in the layout": {rs: "RerunOnFailure", without: []string{"status.nextRetryTime"},
			status: map[string]any{"phase": "Failed", "reason": "ServerFailed", "message": failedMsg, "server": failedServer},
			say: "virtualmachine/vm1 is not running: its server failed (phase Failed (ServerFailed)); runStrategy RerunOnFailure makes a new one " +
				"after the backoff, or at once on a restart (kubectl vm restart vm1 -n ns): nothing changed"},
		"RerunOnFailure, failed server deleted": {rs: "RerunOnFailure",
			status: map[string]any{"phase": "Failed", "reason": "ServerFailed", "message": failedMsg, "nextRetryTime": "2026-06-01T12:00:40Z"},
			say:    "is not running: its server failed (phase Failed (ServerFailed)); runStrategy RerunOnFailure makes a new one at 2026-06-01T12:00:40Z"},
		"Always, failed": {rs: "Always",
			status: map[string]any{"phase": "Failed", "reason": "ServerFailed", "message": failedMsg, "server": failedServer, "nextRetryTime": "2026-06-01T12:00:40Z"},
			say:    "is not running: its server failed (phase Failed (ServerFailed)); runStrategy Always makes a new one at 2026-06-01T12:00:40Z"},
		"RerunOnFailure, server refused": {rs: "RerunOnFailure", status: map[string]any{"phase": "Failed", "reason": "ServerRejected", "message": refusedMsg},
			say: "virtualmachine/vm1 is not running: its server was refused (phase Failed (ServerRejected): " + refusedMsg + "); " +
				"the controller asks for it again every minute, and the VM runs once the cause the message names is fixed: nothing changed"},
		"Manual, server refused": {rs: "Manual", status: map[string]any{"phase": "Failed", "reason": "ServerRejected", "message": refusedMsg},
			say: "virtualmachine/vm1 is not running: its server was refused"},
		"Once, disk refused": {rs: "Once", status: map[string]any{"phase": "Failed", "reason": "DiskRejected", "message": "The disk was refused: quota"},
			say: "virtualmachine/vm1 is not running: its disk was refused (phase Failed (DiskRejected): The disk was refused: quota); the controller asks for it again every minute"},
		"Always, server refused": {rs: "Always", status: map[string]any{"phase": "Failed", "reason": "ServerRejected", "message": refusedMsg},
			say: "virtualmachine/vm1 is not running: its server was refused"},
		"Manual, restarting, spec refused": {rs: "Manual", status: map[string]any{"phase": "Failed", "reason": "InvalidSpec", "message": "spec.resource.memory: 0.5 is a fraction of a byte"},
			say: "virtualmachine/vm1 is not running: its spec is refused (phase Failed (InvalidSpec): spec.resource.memory: 0.5 is a fraction of a byte); " +
				"its server is made once what the message names is fixed: nothing changed"},
		"Once, on its way, disk conflict": {rs: "Once", status: map[string]any{"phase": "Failed", "reason": "DiskConflict", "message": "claim vm1-rootdisk is not this VM's"},
			say: "virtualmachine/vm1 is not running: its disk is refused (phase Failed (DiskConflict): claim vm1-rootdisk is not this VM's)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm, f := withoutFields(t, tc.rs, tc.status, nil, tc.without...)
			r, err := startVerb(vm, f, pluginNow)
			if err != nil || r.patch != nil || !strings.Contains(r.say, tc.say) || strings.Contains(r.say, "already") {
				t.Errorf("start: patch %s, error %v, say:\n%s\nwant nothing written, saying:\n%s", patchText(r), err, r.say, tc.say)
			}
		})
	}
	if decision.RejectedRetry != time.Minute {
		t.Errorf("the controller asks for a refused server again every %s; start says every minute", decision.RejectedRetry)
	}
}

// TestStartOfARefusedStoppedVM: start of a stopped VM that the controller refuses (its status
// a refusal's with the record of the stopped status, RefusedWhileStopped: its disk's name
// another's, its spec invalid, its start's server refused) writes the start request and says
// that the start waits for the refusal to be lifted; the controller keeps it pending until
// then. Run again while the start is pending, it writes nothing and says so, rather than
// "start requested" once more. A stop pending beside it is withdrawn as ever, and a paused
// VM gets the request whatever its status says.
func TestStartOfARefusedStoppedVM(t *testing.T) {
	at := pluginNow.Format(requestTimeLayout)
	const pendingAt = "2026-06-01T11:59:00.000Z"
	conflict := "Disk vm1-rootdisk exists and is not this VM's"
	record := []any{map[string]any{"type": "RefusedWhileStopped", "status": "True", "reason": "Stopped", "message": "Stopped on request"}}
	refusal := func(reason, msg string) map[string]any {
		return map[string]any{"phase": "Failed", "reason": reason, "message": msg, "conditions": record}
	}
	tests := map[string]struct {
		rs     string
		status map[string]any
		ann    map[string]any
		patch  string // "": nothing written
		say    string
	}{
		"disk conflict, first start": {rs: "Manual", status: refusal("DiskConflict", conflict),
			patch: `{"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":"` + at + `","cloudnative.czs/stopGracePeriodSeconds":null}}}`,
			say: "virtualmachine/vm1 start requested (cloudnative.czs/startRequestedAt=" + at + "); its disk is refused (phase Failed (DiskConflict): " + conflict +
				"); the controller carries the start out once what the message names is fixed"},
		"disk conflict, start pending": {rs: "Once", status: refusal("DiskConflict", conflict),
			ann: map[string]any{schema.AnnotationStartRequestedAt: pendingAt},
			say: "virtualmachine/vm1 has a start pending (cloudnative.czs/startRequestedAt=" + pendingAt + ", not yet carried out): its disk is refused " +
				"(phase Failed (DiskConflict): " + conflict + "); the controller carries the start out once what the message names is fixed: nothing changed"},
		"invalid spec, start pending": {rs: "RerunOnFailure", status: refusal("InvalidSpec", "Invalid spec: spec.resources.requests.memory: 100m"),
			ann: map[string]any{schema.AnnotationStartRequestedAt: pendingAt},
			say: "has a start pending (cloudnative.czs/startRequestedAt=" + pendingAt + ", not yet carried out): its spec is refused"},
		"server refused, start pending": {rs: "Manual", status: refusal("ServerRejected", "The server was refused: quota"),
			ann: map[string]any{schema.AnnotationStartRequestedAt: pendingAt},
			say: "its server was refused (phase Failed (ServerRejected): The server was refused: quota); the controller asks for it again every minute"},
		"disk conflict, start and stop pending": {rs: "Manual", status: refusal("DiskConflict", conflict),
			ann:   map[string]any{schema.AnnotationStartRequestedAt: pendingAt, schema.AnnotationStopRequestedAt: pendingAt},
			patch: `{"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":"` + at + `","cloudnative.czs/stopGracePeriodSeconds":null,"cloudnative.czs/stopRequestedAt":null}}}`,
			say:   "the stop requested at " + pendingAt + ", not yet carried out, is withdrawn; its disk is refused"},
		"disk conflict, start pending, paused": {rs: "Manual", status: refusal("DiskConflict", conflict),
			ann:   map[string]any{schema.AnnotationStartRequestedAt: pendingAt, schema.AnnotationPaused: "true"},
			patch: `{"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":"` + at + `","cloudnative.czs/stopGracePeriodSeconds":null}}}`,
			say:   "virtualmachine/vm1 start requested (cloudnative.czs/startRequestedAt=" + at + "); the VM is paused"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm, f := requestVM(t, tc.rs, tc.status, tc.ann)
			r, err := startVerb(vm, f, pluginNow)
			if err != nil || patchText(r) != tc.patch || !strings.Contains(r.say, tc.say) {
				t.Errorf("start: patch %s, error %v, say:\n%s\nwant patch %s, saying:\n%s", patchText(r), err, r.say, tc.patch, tc.say)
			}
		})
	}
}

// TestStopBesideInvalidSpec: a VM whose spec the controller refuses (InvalidSpec) and whose
// server runs beside it is stopped as any running VM (under Always the run strategy becomes
// Halted, under the others a stop request), and the controller deletes the server all the
// same, keeping the status InvalidSpec with the record of the stop (RefusedWhileStopped,
// Stopping). Stopped again while that deletion is under way, the VM is already stopping:
// nothing written, unless --force cuts the shutdown short; restart is refused, as for any VM
// being stopped. start on Halted says the server waits for the spec to be fixed.
func TestStopBesideInvalidSpec(t *testing.T) {
	at := pluginNow.Format(requestTimeLayout)
	zero := int64(0)
	const invalid = "Invalid spec: spec.resources.requests.cpu: Invalid value: \"0\": must be greater than zero"
	live := map[string]any{"name": "vm1-server", "id": "u", "state": "Running"}
	running := map[string]any{"phase": "Failed", "reason": "InvalidSpec", "message": invalid, "server": live}
	stopping := map[string]any{"phase": "Failed", "reason": "InvalidSpec", "server": live,
		"message":    invalid + "; server vm1-server is being deleted all the same (stop requested at 2026-06-01T11:59:00.000Z)",
		"conditions": []any{map[string]any{"type": "RefusedWhileStopped", "status": "True", "reason": "Stopping", "message": "Waiting for server vm1-server to be deleted (stop requested at 2026-06-01T11:59:00.000Z)"}}}
	tests := map[string]struct {
		verb, rs string
		status   map[string]any
		grace    *int64
		patch    string // "": nothing written
		say      string
		refusal  string // the refusal's words; "": not refused
	}{
		"stop on Always": {verb: "stop", rs: "Always", status: running,
			patch: `{"metadata":{"annotations":{"cloudnative.czs/stopGracePeriodSeconds":null}},"spec":{"runStrategy":"Halted"}}`,
			say:   "virtualmachine/vm1 stopped: runStrategy Always -> Halted"},
		"stop on Manual": {verb: "stop", rs: "Manual", status: running,
			patch: `{"metadata":{"annotations":{"cloudnative.czs/stopGracePeriodSeconds":null,"cloudnative.czs/stopRequestedAt":"` + at + `"}}}`,
			say:   "virtualmachine/vm1 stop requested"},
		"stop again while it stops": {verb: "stop", rs: "Manual", status: stopping,
			say: "virtualmachine/vm1 is already stopping (phase Failed (InvalidSpec)): nothing changed; to cut its shutdown short: kubectl vm stop vm1 -n ns --force"},
		"stop --force while it stops": {verb: "stop", rs: "Once", status: stopping, grace: &zero,
			patch: `{"metadata":{"annotations":{"cloudnative.czs/stopGracePeriodSeconds":"0","cloudnative.czs/stopRequestedAt":"` + at + `"}}}`,
			say:   "virtualmachine/vm1 stop requested"},
		"restart while it stops": {verb: "restart", rs: "RerunOnFailure", status: stopping, refusal: "is stopped"},
		"start on Halted": {verb: "start", rs: "Halted", status: map[string]any{"phase": "Failed", "reason": "InvalidSpec", "message": invalid},
			patch: `{"metadata":{"annotations":{"cloudnative.czs/stopGracePeriodSeconds":null}},"spec":{"runStrategy":"Always"}}`,
			say: "virtualmachine/vm1 started: runStrategy Halted -> Always; its spec is refused (phase Failed (InvalidSpec): " + invalid +
				"): its server is made once what the message names is fixed"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm, f := requestVM(t, tc.rs, tc.status, nil)
			r, err := decideVerb(tc.verb, vm, f, tc.grace)
			if tc.refusal != "" {
				if !refused(err, tc.refusal) || r.patch != nil {
					t.Errorf("%s: patch %s, error %v; want exit 1 saying %q, nothing written", tc.verb, patchText(r), err, tc.refusal)
				}
				return
			}
			if err != nil || patchText(r) != tc.patch || !strings.Contains(r.say, tc.say) {
				t.Errorf("%s: patch %s, error %v, say:\n%s\nwant patch %s, saying:\n%s", tc.verb, patchText(r), err, r.say, tc.patch, tc.say)
			}
		})
	}
}

// TestVerbCommandsArePasteable: every command a verb's message gives is the plugin's command
// line for the VM it read, with the flags it was run with that are not its defaults (a
// --context, a --kubeconfig, the --api-version, --resource and --schema-file of a VM of
// another resource), the VM's namespace whatever -n said (none: the kubeconfig's), and a value
// quoted where a shell would split it: pasted as printed, it reaches the same VM. Without them,
// `kubectl vm restart vm1 -n ns` told to run `kubectl vm start vm1`, which starts a vm1 of the
// shell's namespace, context or group, if there is one. A plain kubectl command (the lost
// node's deletion, the paused VM's resumption) carries the --context and --kubeconfig, quoted
// alike: without them, `kubectl delete node node-a` deletes a node-a of the shell's cluster.
func TestVerbCommandsArePasteable(t *testing.T) {
	known := &decision.PluginFlags{Context: "prod", Kubeconfig: "/home/me/.kube/prod config", APIVersion: "cloudnative.czs/v1",
		Resource: schema.DefaultResource, SchemaFile: "maps/vm.yaml"}
	cluster := " --context prod --kubeconfig '/home/me/.kube/prod config'"
	flags := " -n ns" + cluster + " --api-version cloudnative.czs/v1 --schema-file maps/vm.yaml"
	run := verbs{known}
	zero := int64(0)
	server := map[string]any{"name": "vm1-server", "id": "pod-uid", "state": "Running", "node": "node-a"}
	stopPending := map[string]any{schema.AnnotationStopRequestedAt: "2026-06-01T11:59:59Z"}
	tests := map[string]struct {
		rs, verb    string
		status, ann map[string]any
		grace       *int64
		want        string
	}{
		"restart of a stopped VM": {rs: "Manual", verb: "restart", status: map[string]any{"phase": "Inactive", "reason": "Stopped"},
			want: "nothing to restart; start it with: kubectl vm start vm1" + flags},
		"restart with a stop pending": {rs: "Manual", verb: "restart", status: map[string]any{"phase": "Active", "reason": "ServerReady", "server": server},
			ann: stopPending, want: "withdraw the stop with: kubectl vm start vm1" + flags},
		"migrate with a stop pending": {rs: "Manual", verb: "migrate", status: map[string]any{"phase": "Active", "reason": "ServerReady", "server": server},
			ann: stopPending, want: "withdraw the stop with: kubectl vm start vm1" + flags},
		"stop of a VM stopping": {rs: "Manual", verb: "stop", status: map[string]any{"phase": "Inactive", "reason": "Stopping", "server": server},
			want: "to cut its shutdown short: kubectl vm stop vm1" + flags + " --force"},
		"stop of a VM stopping under Halted": {rs: "Halted", verb: "stop", status: map[string]any{"phase": "Inactive", "reason": "ServerStopping", "server": server},
			want: "to cut its server's shutdown short: kubectl vm stop vm1" + flags + " --force"},
		"stop --force on a lost node": {rs: "Always", verb: "stop", grace: &zero, status: map[string]any{"phase": "Unknown", "reason": "NodeLost", "server": server},
			want: "else stop without them (kubectl vm stop vm1" + flags + "): the stop waits for the node"},
		"stop --force on a lost node: its deletion": {rs: "Always", verb: "stop", grace: &zero,
			status: map[string]any{"phase": "Unknown", "reason": "NodeLost", "server": server},
			want:   "delete it (kubectl delete node node-a" + cluster + "; docs/placement.md"},
		"stop --force on a lost node not named": {rs: "Always", verb: "stop", grace: &zero,
			status: map[string]any{"phase": "Unknown", "reason": "NodeLost", "server": map[string]any{"name": "vm1-server", "id": "pod-uid", "state": "Running"}},
			want:   "delete it (kubectl delete node NODE" + cluster + ", NODE the node its status message names; docs/placement.md"},
		"migrate of a paused VM": {rs: "Always", verb: "migrate", status: map[string]any{"phase": "Active", "reason": "ServerReady", "server": server},
			ann:  map[string]any{schema.AnnotationPaused: "true"},
			want: "resume it first: kubectl annotate virtualmachine." + schema.Group + "/vm1 -n ns " + schema.AnnotationPaused + "-" + cluster},
		"start of a VM waiting out its backoff": {rs: "RerunOnFailure", verb: "start",
			status: map[string]any{"phase": "Failed", "reason": "ServerFailed", "server": map[string]any{"name": "vm1-server", "id": "u", "state": "Failed"}},
			want:   "or at once on a restart (kubectl vm restart vm1" + flags + "): nothing changed"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm, f := requestVM(t, tc.rs, tc.status, tc.ann)
			var r verbResult
			var err error
			switch tc.verb {
			case "start":
				r, err = run.start(vm, f, pluginNow)
			case "stop":
				r, err = run.stop(vm, f, pluginNow, tc.grace)
			case "restart":
				r, err = run.restart(vm, f, pluginNow)
			case "migrate":
				_, err = (&vmClient{namespace: "ns"}).migrationSource(context.Background(), vm, known)
			}
			said := r.say
			if err != nil {
				said = err.Error()
			}
			if !strings.Contains(said, tc.want) {
				t.Errorf("%q\nwant it to say %q", said, tc.want)
			}
		})
	}
}

// TestVerbCommandsRepeatTheFlagsGiven: the commands a verb's message gives repeat the flags
// the plugin was run with, as parsed (not as they were when the verb was made, before), and
// the namespace the kubeconfig gave when -n was not.
func TestVerbCommandsRepeatTheFlagsGiven(t *testing.T) {
	srv := newFadingAPIServer(t, "inactive", map[string]any{"phase": "Inactive", "reason": "ServerStopped", "observedGeneration": 1},
		func(string, int) bool { return false })
	kubeconfig := srv.kubeconfig(t)
	app := Plugin("test")
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	err := app.Run(PluginArgs([]string{PluginName, "restart", "vm1", "--kubeconfig", kubeconfig, "--context", "fake"}))
	want := "start it with: kubectl vm start vm1 -n default --context fake --kubeconfig " + kubeconfig
	if !refused(err, want) {
		t.Errorf("%v\nwant exit 1 saying %q", err, want)
	}
}

// TestVerbKubectlCommandsRepeatTheCluster: run with --context and a --kubeconfig whose path a
// shell would split, a verb's message gives its plain kubectl command (the lost node's
// deletion) with both, quoted, as it gives the plugin's own: pasted in a shell pointed at
// another cluster, `kubectl delete node node-a` would delete a node-a there.
func TestVerbKubectlCommandsRepeatTheCluster(t *testing.T) {
	srv := newFadingAPIServer(t, "active", map[string]any{"phase": "Unknown", "reason": "NodeLost", "observedGeneration": 1,
		"server": map[string]any{"name": "vm1-server", "id": "pod-uid", "state": "Running", "node": "node-a"}},
		func(string, int) bool { return false })
	data, err := os.ReadFile(srv.kubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "a b", "config")
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		t.Fatal(err)
	}
	app := Plugin("test")
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	err = app.Run(PluginArgs([]string{PluginName, "stop", "vm1", "--force", "--context", "fake", "--kubeconfig", kubeconfig}))
	cluster := " --context fake --kubeconfig '" + kubeconfig + "'"
	for _, want := range []string{"(kubectl delete node node-a" + cluster + ";", "(kubectl vm stop vm1 -n default" + cluster + ")"} {
		if !refused(err, want) {
			t.Errorf("%v\nwant exit 1 saying %q", err, want)
		}
	}
}
