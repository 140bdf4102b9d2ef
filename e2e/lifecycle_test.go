//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The lifecycle tests drive a VM through kubectl and watch its server pod: a resize in place
// keeps the pod (same UID), a refused one falls back by --resize, and a restart annotation
// replaces the pod exactly once; the VM's Events say what was done, once each. The local cluster's stand-in kubelet (cluster/resizer)
// answers the resizes; the pod annotation resize.kwok.cloudnative.czs/answer forces its answer.

const vmRes = "virtualmachines.cloudnative.czs"

// lifecycleVM creates an Active VM of cpu 1 and waits for it to be Active; it returns the
// server pod's UID.
func lifecycleVM(t *testing.T, ns, name string) string {
	t.Helper()
	apply(t, `apiVersion: cloudnative.czs/v1alpha1
kind: VirtualMachine
metadata: {name: `+name+`, namespace: `+ns+`}
spec:
  action: active
  resource: {cpu: 1, memory: 64Mi, rootDisk: 1Gi}
`)
	waitPhase(t, ns, name, "Active", "", 2*time.Minute)
	waitResizable(t, ns, name+"-server")
	return podUID(t, ns, name)
}

// waitResizable waits until pod's node reports its container's resources, without which the
// API server refuses a resize of the running pod (the node does not support it) and the
// controller, rightly, replaces the server instead. A kubelet reports them as it starts the
// container; on kwok's nodes the local cluster's stand-in (cluster/resizer) does so a moment
// after kwok marks the pod running, and a test that resizes in place waits for that moment.
func waitResizable(t *testing.T, ns, pod string) {
	t.Helper()
	eventually(t, 2*time.Minute, func() (bool, string) {
		cpu, _ := kubectlErr("get", "pod", pod, "-n", ns, "-o", "jsonpath={.status.containerStatuses[0].resources.limits.cpu}")
		return cpu != "", "pod " + pod + " without the resources of its container in its status"
	})
}

func podUID(t *testing.T, ns, name string) string {
	t.Helper()
	return kubectl(t, "get", "pod", name+"-server", "-n", ns, "-o", "jsonpath={.metadata.uid}")
}

// condition is the VM's condition of type typ as "Status/Reason", or "" when it has none.
func condition(ns, name, typ string) string {
	out, _ := kubectlErr("get", vmRes, name, "-n", ns, "-o",
		fmt.Sprintf(`jsonpath={.status.conditions[?(@.type=="%s")].status}/{.status.conditions[?(@.type=="%s")].reason}`, typ, typ))
	if out == "/" {
		return ""
	}
	return out
}

// occurrences is how often the controller recorded an Event of reason on VM vm, with the
// notes of those Events, one a line. The recorder (client-go's events broadcaster) folds a
// repeat of the same reason on the same VM about the same server, as it was (the related
// object, at its resourceVersion; or about no server), into the first Event as a series: it
// writes series.count 2 at the second occurrence, at once, and higher counts only in
// batches. So the count tells 0, 1 and "more than one" apart as soon as the Events are
// stored; an Event about another server, or the same one changed, and one of a recorder of
// another process (the controller started again) is an Event of its own.
func occurrences(t *testing.T, ns, vm, reason string) (int, string) {
	t.Helper()
	out := kubectl(t, "-n", ns, "get", "events.events.k8s.io", "--field-selector", "regarding.name="+vm+",reason="+reason,
		"-o", `jsonpath={range .items[*]}{"#"}{.series.count}{"\t"}{.note}{"\n"}{end}`)
	n := 0
	var notes []string
	for line := range strings.Lines(out) {
		// "#" leads each line, so that an Event without a series keeps its tab.
		count, note, _ := strings.Cut(strings.TrimPrefix(strings.TrimSuffix(line, "\n"), "#"), "\t")
		c, _ := strconv.Atoi(count)
		n += max(c, 1)
		notes = append(notes, note)
	}
	return n, strings.Join(notes, "\n")
}

// eventBarrier is c.barrier, the first in its namespace, followed by the wait for the Event
// the controller records when it first sees the barrier VM (Inactive, reason ServerStopped).
// The recorder posts each Event from a goroutine of its own, started as the Event is
// recorded: once the barrier VM's is stored, those recorded before it are stored too, but for
// a rare overtaking, which can hide a late repeat from a count taken then but never make one
// up.
func eventBarrier(t *testing.T, c *controller) {
	t.Helper()
	c.barrier(t)
	eventually(t, 3*time.Minute, func() (bool, string) {
		n, _ := occurrences(t, c.ns, barrierVM, "ServerStopped")
		return n > 0, "no ServerStopped Event for the barrier VM"
	})
}

// TestLifecycleResizeInPlace: kubectl patch cpu 1 -> 2 keeps the pod's UID, and the VM ends
// Active with the new cpu in effect, no Resizing condition and one ServerResized Event.
func TestLifecycleResizeInPlace(t *testing.T) {
	ns := testNamespace(t)
	c := startController(t, ns, "--workers", "1")
	c.waitReady(t)
	uid := lifecycleVM(t, ns, "grow")
	kubectl(t, "patch", vmRes, "grow", "-n", ns, "--type", "merge", "-p", `{"spec":{"resource":{"cpu":"2"}}}`)
	eventually(t, 2*time.Minute, func() (bool, string) {
		cpu, _ := kubectlErr("get", "pod", "grow-server", "-n", ns, "-o", "jsonpath={.status.containerStatuses[0].resources.limits.cpu}")
		c := condition(ns, "grow", "Resizing")
		return cpu == "2" && c == "", "cpu in effect " + cpu + ", Resizing " + c
	})
	waitPhase(t, ns, "grow", "Active", "", 2*time.Minute)
	if got := podUID(t, ns, "grow"); got != uid {
		t.Errorf("pod UID %s after the resize, want %s (the same pod)", got, uid)
	}
	// Every reconcile the resize caused is done, and its Events are stored: one says the new
	// size is in effect, once.
	eventBarrier(t, c)
	n, notes := occurrences(t, ns, "grow", "ServerResized")
	if n != 1 || notes != "Server grow-server now runs with cpu 2, memory 64Mi" {
		t.Errorf("ServerResized occurred %d times, notes %q; want once, with the new cpu", n, notes)
	}
}

// TestLifecycleInfeasible: a resize the node answers Infeasible replaces the pod under
// --resize in-place, with a ReplacingServer Event that says why, and under manual keeps it
// with RestartRequired=ResizeInfeasible. Under in-place and replace, a size no node has room
// for (cpu 64, where the local cluster's nodes have 32 allocatable) keeps the pod too, with
// RestartRequired=ResizeNoRoom: its replacement could start nowhere.
func TestLifecycleInfeasible(t *testing.T) {
	for _, mode := range []string{"in-place", "manual", "in-place, no room", "replace, no room"} {
		t.Run(mode, func(t *testing.T) {
			ns := testNamespace(t)
			flag, noRoom := strings.CutSuffix(mode, ", no room")
			cpu, kept := "2", "True/ResizeInfeasible"
			if noRoom {
				cpu, kept = "64", "True/ResizeNoRoom"
			}
			startController(t, ns, "--resize", flag).waitReady(t)
			uid := lifecycleVM(t, ns, "big")
			kubectl(t, "annotate", "pod", "big-server", "-n", ns, "resize.kwok.cloudnative.czs/answer=Infeasible")
			kubectl(t, "patch", vmRes, "big", "-n", ns, "--type", "merge", "-p", `{"spec":{"resource":{"cpu":"`+cpu+`"}}}`)
			if mode != "in-place" {
				// The condition is written by the decision that keeps the pod: a replacement
				// would have been decided instead.
				eventually(t, 2*time.Minute, func() (bool, string) {
					c := condition(ns, "big", "RestartRequired")
					return c == kept, c
				})
				if got := podUID(t, ns, "big"); got != uid {
					t.Errorf("pod UID %s under %s, want %s (kept)", got, mode, uid)
				}
				return
			}
			eventually(t, 2*time.Minute, func() (bool, string) {
				got, _ := kubectlErr("get", "pod", "big-server", "-n", ns, "-o", "jsonpath={.metadata.uid}/{.spec.containers[0].resources.limits.cpu}")
				return !strings.HasPrefix(got, uid) && strings.HasSuffix(got, "/2"), got
			})
			waitPhase(t, ns, "big", "Active", "", 2*time.Minute)
			// Events are posted in the background: the wait is for the replacement's.
			eventually(t, 2*time.Minute, func() (bool, string) {
				_, notes := occurrences(t, ns, "big", "ReplacingServer")
				return strings.HasPrefix(notes, "Replacing server big-server: ") && strings.Contains(notes, "cannot resize it in place"),
					"ReplacingServer notes: " + notes
			})
		})
	}
}

// podWatch records every pod of one name in a namespace from the moment it starts, through
// kubectl get --watch, as any client watches: one line per version of the pod, its UID and
// resourceVersion. The API server sends a watch every change, in the order of the
// resourceVersions, so once the watch has printed a given version, it has printed every pod
// of that name there was before it, a pod created and deleted between two polls of a test
// among them.
type podWatch struct {
	*kubectlWatch
	ns, name string
	marks    int
}

// watchPod starts a podWatch of pod name in ns and returns once it has listed the pod there
// is, whose UID is want; the watch ends with the test.
func watchPod(t *testing.T, ns, name, want string) *podWatch {
	t.Helper()
	w := &podWatch{ns: ns, name: name, kubectlWatch: startKubectlWatch(t, "-n", ns, "get", "pod", "--field-selector", "metadata.name="+name, "--watch",
		"-o", `jsonpath={.metadata.uid} {.metadata.resourceVersion}{"\n"}`)}
	eventually(t, 2*time.Minute, func() (bool, string) {
		return strings.HasPrefix(w.lines()[0], want+" "), fmt.Sprintf("pod watch printed %q, want the pod %s first", w.lines(), want)
	})
	return w
}

// mark changes the pod (an annotation of the test's) and waits until the watch has printed
// that version: every version before it has been printed by then. It returns the UIDs the
// watch saw until then, in order, and the pod as the change left it: its UID and whether it
// is being deleted. The pod must exist.
func (w *podWatch) mark(t *testing.T) (uids []string, uid string, deleting bool) {
	t.Helper()
	w.marks++
	out := kubectl(t, "-n", w.ns, "annotate", "pod", w.name, "--overwrite", fmt.Sprintf("e2e.example.org/mark=%d", w.marks),
		"-o", `jsonpath={.metadata.uid} {.metadata.resourceVersion} {.metadata.deletionTimestamp}`)
	f := strings.Fields(out)
	if len(f) < 2 {
		t.Fatalf("annotate pod %s: printed %q", w.name, out)
	}
	seen := f[0] + " " + f[1]
	eventually(t, 2*time.Minute, func() (bool, string) {
		select {
		case <-w.exited:
			t.Fatalf("the pod watch ended: %s", w.errOut.String())
		default:
		}
		uids = nil
		for _, line := range w.lines() {
			u, _, _ := strings.Cut(line, " ")
			if !slices.Contains(uids, u) {
				uids = append(uids, u)
			}
			if line == seen {
				return true, ""
			}
		}
		return false, fmt.Sprintf("the pod watch has not printed %q yet", seen)
	})
	return uids, f[0], len(f) > 2
}

const restartValue = "2026-06-01T12:00:00Z"

// restartedOnce asserts the outcome of one restart on request of VM again, whose first pod
// was first, once its controller has handled everything up to a barrier: the pod there is
// now is the second and last one the VM ever had, and stays (it is not being deleted); the
// status records the restart; and the Events say a restart happened once, and a server was
// created twice (the first pod and its replacement), each CreatingServer an Event of its own
// (it names its pod, see occurrences). The pod watch is the complete record (Events are sent
// in the background, and may be dropped); the Events are what a user reads.
func restartedOnce(t *testing.T, ns, first string, w *podWatch) {
	t.Helper()
	uids, now, deleting := w.mark(t)
	if len(uids) != 2 || uids[0] != first || uids[1] != now || deleting {
		t.Errorf("the VM's pods were %v, the last being deleted: %v; want %s, then one new pod that stays: the restart was carried out once", uids, deleting, first)
	}
	if rec := vmField(ns, "again", ".status.restartedAt"); rec != restartValue {
		t.Errorf("status.restartedAt %q, want %q", rec, restartValue)
	}
	n, notes := occurrences(t, ns, "again", "ServerRestarted")
	if want := "Restarting server again-server: restart requested at " + restartValue; n != 1 || notes != want {
		t.Errorf("ServerRestarted occurred %d times, notes %q; want once, %q", n, notes, want)
	}
	// Events are posted in the background: the wait is for the replacement's creation.
	eventually(t, 2*time.Minute, func() (bool, string) {
		n, notes := occurrences(t, ns, "again", "CreatingServer")
		return n >= 2, fmt.Sprintf("CreatingServer occurred %d times: %q", n, notes)
	})
	if n, notes := occurrences(t, ns, "again", "CreatingServer"); n != 2 {
		t.Errorf("CreatingServer occurred %d times, notes %q; want twice, for the first server and its replacement", n, notes)
	}
}

// TestLifecycleRestart: a new restartedAt gives exactly one new pod, and a controller restart,
// once the new pod runs or between the old pod's deletion and the new one's creation, does
// not give a second.
func TestLifecycleRestart(t *testing.T) {
	t.Run("after", func(t *testing.T) {
		ns := testNamespace(t)
		c := startController(t, ns)
		c.waitReady(t)
		first := lifecycleVM(t, ns, "again")
		w := watchPod(t, ns, "again-server", first)
		kubectl(t, "annotate", vmRes, "again", "-n", ns, "cloudnative.czs/restartedAt="+restartValue, "--overwrite")
		eventually(t, 2*time.Minute, func() (bool, string) {
			got, _ := kubectlErr("get", "pod", "again-server", "-n", ns, "-o", "jsonpath={.metadata.uid}")
			rec := vmField(ns, "again", ".status.restartedAt")
			return got != "" && got != first && rec == restartValue, got + " restartedAt " + rec
		})
		waitPhase(t, ns, "again", "Active", "", 2*time.Minute)
		if err := c.stop(t); err != nil {
			t.Fatal(err)
		}
		c2 := startController(t, ns, "--workers", "1")
		c2.waitReady(t)
		eventBarrier(t, c2) // c2 has decided on the VM, and recorded what it did
		waitPhase(t, ns, "again", "Active", "", 2*time.Minute)
		restartedOnce(t, ns, first, w)
	})

	// The old pod is held by a finalizer of the test's, so that it stays, being deleted,
	// until the test lets it go: the controller is stopped and started again in the gap
	// between the restart's deletion and the creation of the new pod, whatever the speed of
	// the machine.
	t.Run("between", func(t *testing.T) {
		ns := testNamespace(t)
		t.Cleanup(func() { releaseFinalizers(ns, "pods") }) // before the namespace goes
		c := startController(t, ns)
		c.waitReady(t)
		first := lifecycleVM(t, ns, "again")
		kubectl(t, "-n", ns, "patch", "pod", "again-server", "--type=merge", "-p", `{"metadata":{"finalizers":["e2e.example.org/hold"]}}`)
		w := watchPod(t, ns, "again-server", first)
		kubectl(t, "annotate", vmRes, "again", "-n", ns, "cloudnative.czs/restartedAt="+restartValue, "--overwrite")
		eventually(t, 2*time.Minute, func() (bool, string) {
			n, _ := occurrences(t, ns, "again", "ServerRestarted")
			return n > 0, "no ServerRestarted Event"
		})
		if err := c.stop(t); err != nil {
			t.Fatal(err)
		}
		if _, uid, deleting := w.mark(t); uid != first || !deleting {
			t.Fatalf("pod %s (being deleted: %v) when the controller stopped; want %s, held while it is deleted", uid, deleting, first)
		}
		c2 := startController(t, ns, "--workers", "1")
		c2.waitReady(t)
		eventBarrier(t, c2) // c2 has decided on the VM whose old pod is still being deleted
		kubectl(t, "-n", ns, "patch", "pod", "again-server", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		eventually(t, 2*time.Minute, func() (bool, string) {
			got, _ := kubectlErr("get", "pod", "again-server", "-n", ns, "-o", "jsonpath={.metadata.uid}")
			return got != "" && got != first, "pod " + got
		})
		waitPhase(t, ns, "again", "Active", "", 2*time.Minute)
		c2.barrier(t)
		restartedOnce(t, ns, first, w)
	})
}
