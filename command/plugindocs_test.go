package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	discoveryfake "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// The pages that quote what the plugin prints.
var (
	runStrategiesDoc = filepath.Join("..", "docs", "run-strategies.md")
	pluginBadInput   = filepath.Join("..", "docs", "reference", "bad-input.md")
)

// TestPluginDocsQuoteThePlugin: each message of the plugin that docs/run-strategies.md and
// docs/reference/bad-input.md quote is there as the plugin prints it. Each case makes the
// plugin print it (the verb's decision, or the verb against a fake API server) and checks
// that the quote, where "..." and "<...>" stand for any text, matches all of it.
func TestPluginDocsQuoteThePlugin(t *testing.T) {
	gr := k8sschema.GroupResource{Group: schema.Group, Resource: "virtualmachines"}
	tests := map[string]struct {
		doc   string
		quote string                             // as the page has it, its line breaks as spaces
		print func(t *testing.T) (string, error) // the plugin's line: what it says, or its error
	}{
		"start of a running VM under Always": {runStrategiesDoc,
			"virtualmachine/test-vm is already started (runStrategy Always keeps it running; phase Active (ServerReady)): nothing changed",
			decided("test-vm", "Always", "Active", "ServerReady", startVerb)},
		"start of a running VM under Manual": {runStrategiesDoc,
			"virtualmachine/manual-vm is already running (phase Active (ServerReady)): nothing changed",
			decided("manual-vm", "Manual", "Active", "ServerReady", startVerb)},
		"start of a VM waiting out its backoff": {runStrategiesDoc,
			"virtualmachine/rerun-vm is not running: its server failed (phase Failed (ServerFailed)); runStrategy RerunOnFailure makes a new one at " +
				"2026-06-01T12:00:40Z, after the backoff, or at once on a restart (kubectl vm restart rerun-vm -n ns): nothing changed",
			func(t *testing.T) (string, error) {
				vm, f := namedVM(t, "rerun-vm", "RerunOnFailure", map[string]any{"phase": "Failed", "reason": "ServerFailed",
					"server": map[string]any{"name": "rerun-vm-server", "id": "u", "state": "Failed"}, "nextRetryTime": "2026-06-01T12:00:40Z"}, nil)
				r, err := startVerb(vm, f, pluginNow)
				return r.say, err
			}},
		"start of a VM whose server was refused": {runStrategiesDoc,
			"virtualmachine/x is not running: its server was refused (...); the controller asks for it again every minute, and the VM runs once " +
				"the cause the message names is fixed: nothing changed",
			func(t *testing.T) (string, error) {
				vm, f := namedVM(t, "x", "Manual", map[string]any{"phase": "Failed", "reason": "ServerRejected", "message": "The server was refused: quota"}, nil)
				r, err := startVerb(vm, f, pluginNow)
				return r.say, err
			}},
		"a verb on a VM being deleted": {runStrategiesDoc,
			"virtualmachine/x is being deleted (phase Terminating (ServerDeleting)): the controller deletes its server and carries out no " +
				"start, stop, restart or migration of it any more; nothing written",
			func(t *testing.T) (string, error) {
				vm, f := deletingVM(t, "Manual", map[string]any{"phase": "Terminating", "reason": "ServerDeleting"}, nil)
				raw := strings.Replace(string(vm.JSON()), `"name":"vm1"`, `"name":"x"`, 1)
				r, err := restartVerb(schema.ViewOf([]byte(raw), "1", f), f, pluginNow)
				return r.say, err
			}},
		"wait for a VM it never read": {runStrategiesDoc,
			"timed out after 30s waiting for phase=Active of virtualmachine/x, which it never read (last error: ...)",
			func(t *testing.T) (string, error) {
				v, _, _ := waitClient(t, map[string]any{"name": "x"}, nil, func(a k8stesting.Action) (bool, runtime.Object, error) {
					return a.GetVerb() == "list", nil, apierrors.NewTooManyRequests("busy", 1)
				}, nil)
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				w, _ := parseFor("phase=Active")
				return "", v.wait(ctx, "x", w, "phase=Active", 30*time.Second, waitReachGrace)
			}},
		"wait on a cluster it cannot reach": {runStrategiesDoc,
			`cannot reach the cluster: Get "...": dial tcp ...: connect: connection refused`,
			func(t *testing.T) (string, error) {
				v, _, _ := waitClient(t, map[string]any{"name": "x"}, nil, func(a k8stesting.Action) (bool, runtime.Object, error) {
					return a.GetVerb() == "list", nil, refusedConnection()
				}, nil)
				w, _ := parseFor("phase=Active")
				return "", v.wait(context.Background(), "x", w, "phase=Active", 30*time.Second, waitReachGrace)
			}},
		"a verb on a cluster it cannot reach": {runStrategiesDoc,
			`kubectl vm: cannot reach the cluster: Get "...": dial tcp ...: connect: connection refused`,
			onStderr(func(t *testing.T) (string, error) {
				return pluginRun("restart", "x", "--kubeconfig", unreachableKubeconfig(t))(t)
			})},
		"a verb whose credentials cannot be had": {runStrategiesDoc,
			`kubectl vm: cannot authenticate to the cluster: Get "...": getting credentials: exec: executable ... failed with exit code 1`,
			onStderr(func(t *testing.T) (string, error) {
				return pluginRun("status", "x", "--kubeconfig", failingCredentials(t))(t)
			})},
		"bad input: credentials": {pluginBadInput, `kubectl vm: cannot authenticate to the cluster: ...`,
			onStderr(func(t *testing.T) (string, error) {
				return pluginRun("status", "x", "--kubeconfig", failingCredentials(t))(t)
			})},
		"a verb on a cluster whose certificate is not trusted": {runStrategiesDoc,
			`kubectl vm: cannot verify the cluster's certificate: Get "...": tls: failed to verify certificate: x509: certificate signed by unknown authority`,
			onStderr(func(t *testing.T) (string, error) {
				return pluginRun("status", "x", "--kubeconfig", untrustedCluster(t))(t)
			})},
		"bad input: a certificate not trusted": {pluginBadInput, `kubectl vm: cannot verify the cluster's certificate: ...`,
			onStderr(func(t *testing.T) (string, error) {
				return pluginRun("status", "x", "--kubeconfig", untrustedCluster(t))(t)
			})},
		"a write whose connection went": {runStrategiesDoc,
			"(the write may have been made all the same: look at the VM before running the verb again)",
			writeCut},
		"wait on a cluster that goes": {runStrategiesDoc,
			`cannot reach the cluster: Get "...": dial tcp ...: connect: connection refused (for 1m0s while waiting ` +
				"for phase=Active of virtualmachine/x; last seen: phase Creating (ServerStarting))",
			func(t *testing.T) (string, error) { return "", waitGone(t) }},
		"an unknown flag": {runStrategiesDoc, "kubectl vm: unknown flag --bogus (see kubectl vm status --help)",
			onStderr(pluginRun("--bogus", "status", "x"))},
		"no verb": {runStrategiesDoc,
			"kubectl vm: no verb given (kubectl vm VERB NAME: start, stop, restart, wait, status or migrate; see --help)",
			onStderr(pluginRun("-n", "team-a"))},
		"a VM that changes at every try": {runStrategiesDoc,
			"changed while the verb looked at it, 5 times in a row; run it again", conflicting},
		"no such VM": {runStrategiesDoc, `virtualmachine "x" not found in namespace "y"`, missing("x", "y", "v1alpha1", true)},

		"bad input: another kind": {pluginBadInput,
			`kubectl vm: argument "pod/x": pod is not a VM (virtualmachines.cloudnative.czs): give the VM's NAME or vm/NAME`,
			onStderr(func(*testing.T) (string, error) {
				c := pluginConfig{resourceFlags: resourceFlags{APIVersion: schema.DefaultAPIVersion}}
				_, err := c.vmName("pod/x")
				return "", err
			})},
		"another kind": {runStrategiesDoc,
			`kubectl vm: argument "pod/x": pod is not a VM (virtualmachines.cloudnative.czs): give the VM's NAME or vm/NAME`,
			onStderr(func(*testing.T) (string, error) {
				c := pluginConfig{resourceFlags: resourceFlags{APIVersion: schema.DefaultAPIVersion}}
				_, err := c.vmName("pod/x")
				return "", err
			})},
		"bad input: no such VM": {pluginBadInput, `kubectl vm: virtualmachine "nope" not found in namespace "team-a"`,
			onStderr(missing("nope", "team-a", "v1alpha1", true))},
		"bad input: a version not served": {pluginBadInput,
			`kubectl vm: virtualmachine "x" not found in namespace "y": the API server does not serve cloudnative.czs/v1 (--api-version)`,
			onStderr(missing("x", "y", "v1", false))},
		"a version the argument names, not served": {runStrategiesDoc,
			`the API server does not serve cloudnative.czs/v1 (argument "vm.v1.cloudnative.czs/x")`, missingNamed("vm.v1.cloudnative.czs/x")},
		"bad input: a version the argument names, not served": {pluginBadInput,
			`... (argument "vm.v1.cloudnative.czs/x")`, missingNamed("vm.v1.cloudnative.czs/x")},
		"bad input: nodes forbidden": {pluginBadInput, "cannot read the nodes: forbidden (...)", func(*testing.T) (string, error) {
			return "", (&vmClient{}).lookupError("the nodes", apierrors.NewForbidden(k8sschema.GroupResource{Resource: "nodes"}, "", errors.New("no")))
		}},
		"bad input: volume forbidden": {pluginBadInput, "cannot read the volume pv1: forbidden (...)", func(*testing.T) (string, error) {
			return "", (&vmClient{}).lookupError("the volume pv1", apierrors.NewForbidden(k8sschema.GroupResource{Resource: "persistentvolumes"}, "pv1", errors.New("no")))
		}},
		"bad input: a cluster it cannot reach": {pluginBadInput,
			`kubectl vm: cannot reach the cluster: Get "...": dial tcp ...: connect: connection refused`,
			onStderr(func(t *testing.T) (string, error) {
				return pluginRun("status", "x", "--kubeconfig", unreachableKubeconfig(t))(t)
			})},
		"bad input: a write whose connection went": {pluginBadInput,
			"(the write may have been made all the same: look at the VM before running the verb again)",
			writeCut},
		"bad input: VM forbidden": {pluginBadInput,
			`kubectl vm: cannot read virtualmachine "x" in namespace "y": forbidden (<the API server's message>)`,
			onStderr(func(*testing.T) (string, error) {
				return "", (&vmClient{namespace: "y"}).readError("x", apierrors.NewForbidden(gr, "x", errors.New("no")))
			})},
		"bad input: start of a running VM": {pluginBadInput,
			"virtualmachine/x is already running (phase Active (ServerReady)): nothing changed",
			decided("x", "Manual", "Active", "ServerReady", startVerb)},
		"bad input: start of a running VM under Always": {pluginBadInput,
			"virtualmachine/x is already started (runStrategy Always keeps it running; phase Active (ServerReady)): nothing changed",
			decided("x", "Always", "Active", "ServerReady", startVerb)},
		"bad input: stop of a stopped VM": {pluginBadInput, "virtualmachine/x is already stopped (...): nothing changed",
			decided("x", "Manual", "Inactive", "Stopped", stopWithoutGrace)},
		"bad input: stop of a stopped VM under Halted": {pluginBadInput, "virtualmachine/x is already stopped (...): nothing changed",
			decided("x", "Halted", "Inactive", "ServerStopped", stopWithoutGrace)},
		"bad input: restart of a stopped VM": {pluginBadInput,
			"virtualmachine/x is stopped (runStrategy Manual; ...): nothing to restart; start it with: kubectl vm start x -n ns",
			decided("x", "Manual", "Inactive", "Stopped", restartVerb)},
		"stop --force on a lost node": {runStrategiesDoc,
			"kubectl vm: virtualmachine/db: --force and --grace-period are refused while its server's node does not answer (phase Unknown (NodeLost)): " +
				"its guest may still run there with the disk, and a forced deletion would let a new server write the same disk; if the node is down for good, " +
				"delete it (kubectl delete node node-a; docs/placement.md#when-a-node-is-lost); else stop without them (kubectl vm stop db -n ns): the stop waits for the node",
			onStderr(stopLost("db"))},
		"bad input: stop --force on a lost node": {pluginBadInput,
			"virtualmachine/x: --force and --grace-period are refused while its server's node does not answer (...): ...; if the node is down for good, " +
				"delete it (kubectl delete node node-a; docs/placement.md#when-a-node-is-lost); else stop without them (kubectl vm stop x -n ns): the stop waits for the node",
			stopLost("x")},
		"a start the field map cannot record": {runStrategiesDoc,
			"virtualmachine/x cannot take a start request: its field map has no status.startRequestedAt to record it in, so the controller ignores " +
				"cloudnative.czs/startRequestedAt there; nothing written (docs/field-maps-and-versions.md)", unrecordedStart},
		"bad input: a start the field map cannot record": {pluginBadInput,
			"virtualmachine/x cannot take a start request: its field map has no status.startRequestedAt to record it in, ...", unrecordedStart},
		"bad input: restart with a stop pending": {pluginBadInput,
			"virtualmachine/x has a stop pending (cloudnative.czs/stopRequestedAt=..., not yet carried out): a restart now would be dropped; " +
				"to keep it running, withdraw the stop with: kubectl vm start x -n ns",
			func(t *testing.T) (string, error) {
				vm, f := namedVM(t, "x", "Manual", map[string]any{"phase": "Active", "reason": "ServerReady"},
					map[string]any{schema.AnnotationStopRequestedAt: "2026-06-01T11:59:59Z"})
				r, err := restartVerb(vm, f, pluginNow)
				return r.say, err
			}},
		"bad input: wait past its timeout": {pluginBadInput,
			"timed out after 3s waiting for phase=Active of virtualmachine/idle; last seen: phase Inactive (NotStarted): <message>",
			func(t *testing.T) (string, error) {
				v, _, _ := waitClient(t, map[string]any{"name": "idle"}, map[string]any{"phase": "Inactive", "reason": "NotStarted",
					"message": "runStrategy Manual: the VM runs when asked to", "observedGeneration": int64(1)}, nil, nil)
				// The message names --timeout, 3s; the test ends it sooner.
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				w, _ := parseFor("phase=Active")
				return "", v.wait(ctx, "idle", w, "phase=Active", 3*time.Second, waitReachGrace)
			}},
		"bad input: wait for Inactive past its timeout, the server stopping": {pluginBadInput,
			"timed out after 5s waiting for phase=Inactive of virtualmachine/test-vm; last seen: phase Inactive, but its server test-vm-server is still stopping (ServerStopping)",
			func(t *testing.T) (string, error) {
				v, _, _ := waitClient(t, map[string]any{"name": "test-vm"}, map[string]any{"phase": "Inactive", "reason": "ServerStopping",
					"observedGeneration": int64(1), "server": map[string]any{"name": "test-vm-server", "id": "pod-uid", "state": "Running"}}, nil, nil)
				// The message names --timeout, 5s; the test ends it sooner.
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				w, _ := parseFor("phase=Inactive")
				return "", v.wait(ctx, "test-vm", w, "phase=Inactive", 5*time.Second, waitReachGrace)
			}},
		"bad input: wait for a VM deleted meanwhile": {pluginBadInput,
			`virtualmachine "x" was deleted while waiting for phase=Active; last seen: phase Terminating (ServerDeleting): <message>`,
			func(t *testing.T) (string, error) { err, _ := waitDeleted(t, "x", "phase=Active"); return "", err }},
		"wait for a VM deleted meanwhile": {runStrategiesDoc,
			`virtualmachine "x" was deleted while waiting for phase=Active; last seen: phase Terminating (ServerDeleting): ...`,
			func(t *testing.T) (string, error) { err, _ := waitDeleted(t, "x", "phase=Active"); return "", err }},
		"bad input: wait may not watch": {pluginBadInput,
			`cannot watch virtualmachine "x" in namespace "y": forbidden (<the API server's message>)`,
			waitRefused("watch", apierrors.NewForbidden(gr, "x", errors.New("no watch")))},
		"bad input: wait may not list": {pluginBadInput, `cannot read virtualmachine "x" ...`,
			waitRefused("list", apierrors.NewForbidden(gr, "x", errors.New("no list")))},
		"bad input: migrate of a VM that does not run": {pluginBadInput,
			"virtualmachine/x is not running (...): only a running VM migrates", migrateRefused("Inactive", "", false)},
		"bad input: migrate of a VM whose disk is pinned": {pluginBadInput,
			"virtualmachine/x cannot migrate: its disk x-rootdisk cannot follow it (its volume pv1 is bound to n1 by its node affinity, which admits no other node)",
			migrateRefused("Active", "affinity", true)},
		"bad input: migrate of a VM whose disk is a local volume": {pluginBadInput,
			"... (its volume pv1 is a local volume on n1)", migrateRefused("Active", "local", true)},
		"bad input: migrate with no other node": {pluginBadInput,
			"virtualmachine/x cannot migrate: no other Ready node than n1 that its placement admits (with the tolerations admission gave its server)", migrateRefused("Active", "", false)},
		"bad input: a VM that changes at every try": {pluginBadInput,
			`virtualmachine "x" changed while the verb looked at it, 5 times in a row; run it again`, conflicting},
	}
	pages := map[string]string{}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			page, ok := pages[tc.doc]
			if !ok {
				b, err := os.ReadFile(tc.doc)
				if err != nil {
					t.Fatal(err)
				}
				page = strings.Join(strings.Fields(string(b)), " ")
				pages[tc.doc] = page
			}
			if !strings.Contains(page, tc.quote) {
				t.Errorf("%s does not quote %q", tc.doc, tc.quote)
			}
			say, err := tc.print(t)
			if err != nil {
				say = err.Error()
			}
			if !quotes(tc.quote).MatchString(say) {
				t.Errorf("the plugin prints %q; %s quotes it as %q", say, tc.doc, tc.quote)
			}
		})
	}
}

// pluginRun runs the plugin with args, as kubectl would: its error.
func pluginRun(args ...string) func(*testing.T) (string, error) {
	return func(*testing.T) (string, error) {
		app := Plugin("test")
		var out bytes.Buffer
		app.Writer, app.ErrWriter = &out, &out
		return out.String(), app.Run(PluginArgs(append([]string{PluginName}, args...)))
	}
}

// failingCredentials is a kubeconfig whose credential plugin fails.
func failingCredentials(t *testing.T) string {
	return writeKubeconfig(t, map[string]any{"server": "https://" + closedPort(t)},
		map[string]any{"exec": map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "command": "false", "interactiveMode": "Never"}})
}

// untrustedCluster is a kubeconfig of a cluster whose certificate it does not trust.
func untrustedCluster(t *testing.T) string {
	s := tlsAPIServer(t, nil, nil)
	return writeKubeconfig(t, map[string]any{"server": s.URL}, map[string]any{"token": "x"})
}

// writeCut is the restart of the VM x whose write's connection goes once it was sent.
func writeCut(t *testing.T) (string, error) {
	v, _, _ := waitClient(t, map[string]any{"name": "x"}, map[string]any{"phase": "Active", "reason": "ServerReady"},
		func(a k8stesting.Action) (bool, runtime.Object, error) {
			return a.GetVerb() == "patch", nil, &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443/x", Err: io.EOF}
		}, nil)
	_, err := v.verb(context.Background(), "x", restartVerb)
	return "", err
}

// waitGone is wait for phase=Active of the VM x, Creating, whose cluster goes once it was
// read: the watch falls behind (410), and every list after it is refused its connection. Its
// clock jumps two minutes as the cluster goes, so that the grace the message names
// (--unreachable-timeout's default) is past at the first refused list.
func waitGone(t *testing.T) error {
	var mu sync.Mutex
	lists := 0
	at := pluginNow
	list := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() != "list" {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if lists++; lists == 1 {
			return false, nil, nil
		}
		at = pluginNow.Add(2 * time.Minute)
		return true, nil, refusedConnection()
	}
	expire := func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewRaceFreeFake()
		w.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
		w.Stop()
		return true, w, nil
	}
	v, _, _ := waitClient(t, map[string]any{"name": "x"}, map[string]any{"phase": "Creating", "reason": "ServerStarting", "observedGeneration": int64(1)}, list, expire)
	v.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return at
	}
	w, _ := parseFor("phase=Active")
	return v.wait(context.Background(), "x", w, "phase=Active", 30*time.Second, waitReachGrace)
}

// quotes is the pattern of a quote: "..." and "<...>" stand for any text, and the quote ends
// where the line does (it may leave out the line's beginning, as "changed while the verb
// looked at it, ..." does, the VM's name before it).
func quotes(quote string) *regexp.Regexp {
	var b strings.Builder
	rest := quote
	for {
		loc := regexp.MustCompile(`\.\.\.|<[^>]+>`).FindStringIndex(rest)
		if loc == nil {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		b.WriteString(regexp.QuoteMeta(rest[:loc[0]]) + ".+")
		rest = rest[loc[1]:]
	}
	return regexp.MustCompile(b.String() + "$")
}

// decided is what verb says of the VM named name under rs, in the phase and reason given.
func decided(name, rs, phase, reason string, verb func(schema.VirtualMachine, schema.Fields, time.Time) (verbResult, error)) func(*testing.T) (string, error) {
	return func(t *testing.T) (string, error) {
		vm, f := namedVM(t, name, rs, map[string]any{"phase": phase, "reason": reason}, nil)
		r, err := verb(vm, f, pluginNow)
		return r.say, err
	}
}

// stopLost is `kubectl vm stop NAME --force` of the VM name under Always, whose server's node,
// node-a, does not answer.
func stopLost(name string) func(*testing.T) (string, error) {
	return func(t *testing.T) (string, error) {
		zero := int64(0)
		vm, f := namedVM(t, name, "Always", map[string]any{"phase": "Unknown", "reason": "NodeLost",
			"server": map[string]any{"name": name + "-server", "id": "u", "state": "Running", "node": "node-a"}}, nil)
		r, err := stopVerb(vm, f, pluginNow, &zero)
		return r.say, err
	}
}

// unrecordedStart is a start of the Manual VM x, not started, whose field map has no
// status.startRequestedAt.
func unrecordedStart(t *testing.T) (string, error) {
	vm, f := namedWithout(t, "x", "Manual", map[string]any{"phase": "Inactive", "reason": "NotStarted"}, nil, "status.startRequestedAt")
	r, err := startVerb(vm, f, pluginNow)
	return r.say, err
}

// stopWithoutGrace is stop without --grace-period or --force.
func stopWithoutGrace(vm schema.VirtualMachine, f schema.Fields, now time.Time) (verbResult, error) {
	return stopVerb(vm, f, now, nil)
}

// onStderr is what RunMain writes of print's error, as the plugin's main does.
func onStderr(print func(*testing.T) (string, error)) func(*testing.T) (string, error) {
	return func(t *testing.T) (string, error) {
		_, err := print(t)
		var stderr bytes.Buffer
		app := &cli.App{Action: func(*cli.Context) error { return err }, ExitErrHandler: func(*cli.Context, error) {}}
		RunMain(app, "kubectl vm", []string{PluginName}, &stderr)
		return strings.TrimSuffix(stderr.String(), "\n"), nil
	}
}

// missing is the read of the VM name in namespace ns, which does not exist, at the version
// given; served: whether the API server serves it.
func missing(name, ns, version string, served bool) func(*testing.T) (string, error) {
	return func(t *testing.T) (string, error) {
		gvr := k8sschema.GroupVersionResource{Group: schema.Group, Version: version, Resource: "virtualmachines"}
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[k8sschema.GroupVersionResource]string{gvr: "VirtualMachineList"})
		kube := kubefake.NewClientset()
		list := &metav1.APIResourceList{GroupVersion: "cloudnative.czs/v1alpha1", APIResources: []metav1.APIResource{{Name: "virtualmachines"}}}
		if served {
			list.GroupVersion = gvr.GroupVersion().String()
		}
		kube.Discovery().(*discoveryfake.FakeDiscovery).Resources = []*metav1.APIResourceList{list}
		v := &vmClient{vms: dyn.Resource(gvr).Namespace(ns), kube: kube, gvr: gvr, namespace: ns, now: time.Now}
		_, _, err := v.get(context.Background(), name)
		return "", err
	}
}

// missingNamed is a read of the VM that arg names, TYPE/NAME with a version, from an API
// server that serves v1alpha1 only and has no such VM.
func missingNamed(arg string) func(*testing.T) (string, error) {
	return func(t *testing.T) (string, error) {
		c := pluginConfig{resourceFlags: resourceFlags{APIVersion: schema.DefaultAPIVersion}}
		ref, err := c.vmName(arg)
		if err != nil {
			return "", err
		}
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[k8sschema.GroupVersionResource]string{ref.gvr: "VirtualMachineList"})
		kube := kubefake.NewClientset()
		kube.Discovery().(*discoveryfake.FakeDiscovery).Resources = []*metav1.APIResourceList{
			{GroupVersion: schema.DefaultAPIVersion, APIResources: []metav1.APIResource{{Name: schema.DefaultResource}}}}
		v := &vmClient{vms: dyn.Resource(ref.gvr).Namespace("y"), kube: kube, gvr: ref.gvr, versionFrom: ref.versionFrom, namespace: "y", now: time.Now}
		_, _, err = v.get(context.Background(), ref.name)
		return "", err
	}
}

// conflicting is a start whose every write meets a conflict.
func conflicting(t *testing.T) (string, error) {
	v, dyn, _ := waitClient(t, map[string]any{"name": "x"}, map[string]any{"phase": "Inactive", "reason": "Stopped", "observedGeneration": int64(1)}, nil, nil)
	dyn.PrependReactor("patch", "virtualmachines", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(v.gvr.GroupResource(), "x", errors.New("the object has been modified"))
	})
	return v.verb(context.Background(), "x", func(vm schema.VirtualMachine, f schema.Fields, now time.Time) (verbResult, error) {
		return verbResult{patch: annotations(map[string]any{schema.AnnotationStartRequestedAt: "t"})}, nil
	})
}

// waitRefused is a wait on the VM x in namespace y whose list or watch (verb) the API server
// refuses with err.
func waitRefused(verb string, err error) func(*testing.T) (string, error) {
	return func(t *testing.T) (string, error) {
		var react k8stesting.ReactionFunc
		var watchReact k8stesting.WatchReactionFunc
		if verb == "list" {
			react = func(a k8stesting.Action) (bool, runtime.Object, error) { return a.GetVerb() == "list", nil, err }
		} else {
			watchReact = func(k8stesting.Action) (bool, watch.Interface, error) { return true, nil, err }
		}
		v, _, _ := waitClient(t, map[string]any{"name": "x"}, map[string]any{"phase": "Creating", "observedGeneration": int64(1)}, react, watchReact)
		v.namespace = "y" // the namespace the message names
		w, _ := parseFor("phase=Active")
		return "", v.wait(context.Background(), "x", w, "phase=Active", time.Second, waitReachGrace)
	}
}

// migrateRefused is a migration of the VM x in the phase given, its server on n1 and its disk
// on pv1; pinned: "affinity" when pv1 is bound to n1 by its node affinity, "local" when it is
// besides a local volume, "" when nothing pins it; other: a second node, n2, is Ready and
// schedulable.
func migrateRefused(phase, pinned string, other bool) func(*testing.T) (string, error) {
	return func(t *testing.T) (string, error) {
		gvr := k8sschema.GroupVersionResource{Group: schema.Group, Version: "v1alpha1", Resource: "virtualmachines"}
		f, err := schema.ForVersion(gvr.GroupVersion())
		if err != nil {
			t.Fatal(err)
		}
		node := func(name string) *corev1.Node {
			return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		}
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}}
		if pinned == "local" {
			pv.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt/disks/1"}
		}
		if pinned != "" {
			pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}}}}}
		}
		objects := []runtime.Object{node("n1"), pv,
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x-server", Namespace: "y"}, Spec: corev1.PodSpec{NodeName: "n1"}},
			&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "x-rootdisk", Namespace: "y"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv1"}}}
		if other {
			objects = append(objects, node("n2"))
		}
		vm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cloudnative.czs/v1alpha1", "kind": "VirtualMachine",
			"metadata": map[string]any{"name": "x", "namespace": "y", "resourceVersion": "1"},
			"spec":     map[string]any{"action": "active", "resource": map[string]any{"cpu": "1", "memory": "1Gi", "rootDisk": "1Gi"}},
			"status": map[string]any{"phase": phase, "reason": "x", "server": map[string]any{"name": "x-server", "id": "u", "state": "Running"},
				"rootDisk": map[string]any{"claimName": "x-rootdisk", "phase": "Bound"}}}}
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[k8sschema.GroupVersionResource]string{gvr: "VirtualMachineList"}, vm)
		v := &vmClient{vms: dyn.Resource(gvr).Namespace("y"), kube: kubefake.NewClientset(objects...), fields: f, gvr: gvr,
			namespace: "y", out: &bytes.Buffer{}, now: func() time.Time { return pluginNow }}
		return "", v.migrate(context.Background(), "x", nil)
	}
}

// TestPluginDocsByHandWrites: the writes docs/run-strategies.md gives "by hand" are the ones
// the verbs make on the VMs it names, under their run strategies: test-vm is the README's
// (examples/test-vm.yaml, runStrategy Always), manual-vm is the same under Manual. A request
// annotation is start's or stop's write under RerunOnFailure, Once and Manual only: under
// Always and Halted the verbs change the spec, and the controller records a request and does
// nothing more.
func TestPluginDocsByHandWrites(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("..", "examples", "test-vm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vms := map[string]string{"test-vm": "", "manual-vm": "manual"} // name: spec.action ("": the example's)
	page, err := os.ReadFile(runStrategiesDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(page), "By hand, the same writes")
	if _, block, ok = strings.Cut(block, "```sh\n"); ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok {
		t.Fatalf("%s: no sh block after \"By hand, the same writes\"", runStrategiesDoc)
	}
	lines := 0
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "kubectl" || f[2] != "vm" {
			continue
		}
		lines++
		name := f[3]
		action, known := vms[name]
		if !known {
			t.Errorf("%q: a VM the test does not know; want one of %v", line, vms)
			continue
		}
		// vm is the VM name under action (or its own), in the status given.
		vm := func(action string, status map[string]any) (schema.VirtualMachine, schema.Fields) {
			raw, err := yaml.YAMLToJSON(example)
			if err != nil {
				t.Fatal(err)
			}
			var obj map[string]any
			if err := json.Unmarshal(raw, &obj); err != nil {
				t.Fatal(err)
			}
			obj["metadata"].(map[string]any)["name"] = name
			if action != "" {
				obj["spec"].(map[string]any)["action"] = action
			}
			obj["status"] = status
			raw, _ = json.Marshal(obj)
			gv, _ := k8sschema.ParseGroupVersion(obj["apiVersion"].(string))
			fields, err := schema.ForVersion(gv)
			if err != nil {
				t.Fatal(err)
			}
			return schema.ViewOf(raw, "1", fields), fields
		}
		running := map[string]any{"phase": "Active", "reason": "ServerReady"}
		stopped := map[string]any{"phase": "Inactive", "reason": "Stopped"}
		var r verbResult
		var want string // what the verb must write, as the line does
		switch f[1] {
		case "annotate":
			var keys []string
			var grace *int64
			for _, kv := range f[4:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || strings.HasPrefix(k, "-") {
					continue
				}
				keys = append(keys, k)
				if k == schema.AnnotationStopGracePeriod {
					g, _ := strconv.ParseInt(v, 10, 64)
					grace = &g
				}
			}
			slices.Sort(keys)
			want = "annotations " + strings.Join(keys, ", ")
			switch {
			case slices.Contains(keys, schema.AnnotationStartRequestedAt):
				v, fl := vm(action, stopped)
				r, err = startVerb(v, fl, pluginNow)
			case slices.Contains(keys, schema.AnnotationStopRequestedAt):
				v, fl := vm(action, running)
				r, err = stopVerb(v, fl, pluginNow, grace)
			default:
				t.Errorf("%q: neither a start nor a stop request", line)
				continue
			}
		case "patch":
			_, p, _ := strings.Cut(line, "-p '")
			p, _, _ = strings.Cut(p, "'")
			var spec struct {
				Spec struct {
					Action string `json:"action"`
				} `json:"spec"`
			}
			if err := json.Unmarshal([]byte(p), &spec); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			want = "spec.action " + spec.Spec.Action
			switch spec.Spec.Action {
			case "active": // start on Halted
				v, fl := vm("inactive", stopped)
				r, err = startVerb(v, fl, pluginNow)
			case "inactive": // stop on Always
				v, fl := vm("active", running)
				r, err = stopVerb(v, fl, pluginNow, nil)
			default:
				t.Errorf("%q: no verb writes spec.action %q", line, spec.Spec.Action)
				continue
			}
			if action != "" && action != "active" && action != "inactive" {
				t.Errorf("%q: %s is under action %s, where the verbs write requests, not the spec", line, name, action)
			}
		default:
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", line, err)
			continue
		}
		if got := written(r.patch); got != want {
			t.Errorf("%q writes %s; on %s the verb writes %q (%s)", line, want, name, got, r.say)
		}
	}
	if lines == 0 {
		t.Fatalf("%s: no kubectl line by hand", runStrategiesDoc)
	}
}

// written says what a verb's merge patch sets: the annotations it gives a value (in order),
// or the spec's action; "nothing" for no patch.
func written(p map[string]any) string {
	if p == nil {
		return "nothing"
	}
	if spec, ok := p["spec"].(map[string]any); ok {
		return fmt.Sprintf("spec.action %v", spec["action"])
	}
	md, _ := p["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	var keys []string
	for k, v := range ann {
		if v != nil {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return "annotations " + strings.Join(keys, ", ")
}
