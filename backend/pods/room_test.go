package pods

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// roomNode is a node of the allocatable cpu and memory given, cordoned or not, Ready since
// the heartbeat at beat.
func roomNode(name, cpu, memory string, cordoned bool) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: cordoned},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("110")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Unix(1, 0)}}}}
}

// labelled is n with the labels given.
func labelled(n *corev1.Node, labels map[string]string) *corev1.Node {
	n.Labels = labels
	return n
}

// tainted is n with the taint key:effect.
func tainted(n *corev1.Node, key string, effect corev1.TaintEffect) *corev1.Node {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect})
	return n
}

// beat is n with its Ready condition's heartbeat at second s: a change of the node that
// bears on no host.
func beat(n *corev1.Node, s int64) *corev1.Node {
	n.Status.Conditions[0].LastHeartbeatTime = metav1.Unix(s, 0)
	return n
}

// small is the spec of a server whose placement admits the nodes labelled size=small.
var small = backend.Spec{Placement: &backend.Placement{NodeSelector: map[string]string{"size": "small"}}}

// roomLine is the room hosts have for spec, as a test compares it.
func roomLine(h *backend.Hosts, spec backend.Spec) string {
	if h == nil {
		return "unknown"
	}
	r := h.Room(spec, nil)
	return fmt.Sprintf("cpu %s, memory %s, %d of %d nodes", r.CPU.String(), r.Memory.String(), r.Hosts, r.Known)
}

// TestRoomsSet: the hosts follow nodes added, changed, labelled, tainted, cordoned,
// uncordoned and deleted, each such change a new snapshot at the next read; a change that
// bears on no host (a heartbeat, a node deleted that was not there) keeps the snapshot there
// is, the same pointer, and so does a read after a read.
func TestRoomsSet(t *testing.T) {
	r := newRooms()
	for i, step := range []struct {
		name string
		node *corev1.Node // nil: deleted
		same bool         // the snapshot stays the one there was
		want string       // the room for a spec without placement
		// wantSmall is the room for small, "" where it is want.
		wantSmall string
	}{
		{name: "n1", node: roomNode("n1", "32", "128Gi", false), want: "cpu 32, memory 128Gi, 1 of 1 nodes", wantSmall: "cpu 0, memory 0, 0 of 1 nodes"},
		{name: "n2", node: roomNode("n2", "16", "256Gi", false), want: "cpu 32, memory 256Gi, 2 of 2 nodes", wantSmall: "cpu 0, memory 0, 0 of 2 nodes"},
		{name: "n2", node: beat(roomNode("n2", "16", "256Gi", false), 2), same: true, want: "cpu 32, memory 256Gi, 2 of 2 nodes", wantSmall: "cpu 0, memory 0, 0 of 2 nodes"},
		{name: "n2", node: labelled(roomNode("n2", "16", "256Gi", false), map[string]string{"size": "small"}),
			want: "cpu 32, memory 256Gi, 2 of 2 nodes", wantSmall: "cpu 16, memory 256Gi, 1 of 2 nodes"},
		{name: "n2", node: beat(labelled(roomNode("n2", "16", "256Gi", false), map[string]string{"size": "small"}), 3), same: true,
			want: "cpu 32, memory 256Gi, 2 of 2 nodes", wantSmall: "cpu 16, memory 256Gi, 1 of 2 nodes"},
		{name: "n1", node: roomNode("n1", "32", "128Gi", true), want: "cpu 16, memory 256Gi, 1 of 2 nodes", wantSmall: "cpu 16, memory 256Gi, 1 of 2 nodes"},  // cordoned
		{name: "n3", node: roomNode("n3", "64", "512Gi", true), want: "cpu 16, memory 256Gi, 1 of 3 nodes", wantSmall: "cpu 16, memory 256Gi, 1 of 3 nodes"},  // cordoned from the start
		{name: "n1", node: roomNode("n1", "32", "128Gi", false), want: "cpu 32, memory 256Gi, 2 of 3 nodes", wantSmall: "cpu 16, memory 256Gi, 1 of 3 nodes"}, // uncordoned
		{name: "n1", node: tainted(roomNode("n1", "32", "128Gi", false), "dedicated", corev1.TaintEffectNoSchedule),
			want: "cpu 16, memory 256Gi, 1 of 3 nodes", wantSmall: "cpu 16, memory 256Gi, 1 of 3 nodes"},
		{name: "n1", node: tainted(roomNode("n1", "32", "128Gi", false), "dedicated", corev1.TaintEffectPreferNoSchedule),
			want: "cpu 32, memory 256Gi, 2 of 3 nodes", wantSmall: "cpu 16, memory 256Gi, 1 of 3 nodes"}, // only discourages
		{name: "n2", node: labelled(roomNode("n2", "48", "64Gi", false), map[string]string{"size": "small"}),
			want: "cpu 48, memory 128Gi, 2 of 3 nodes", wantSmall: "cpu 48, memory 64Gi, 1 of 3 nodes"}, // resized
		{name: "n2", want: "cpu 32, memory 128Gi, 1 of 2 nodes", wantSmall: "cpu 0, memory 0, 0 of 2 nodes"},
		{name: "n4", same: true, want: "cpu 32, memory 128Gi, 1 of 2 nodes", wantSmall: "cpu 0, memory 0, 0 of 2 nodes"}, // never there
		{name: "n3", want: "cpu 32, memory 128Gi, 1 of 1 nodes", wantSmall: "cpu 0, memory 0, 0 of 1 nodes"},
		{name: "n1", want: "cpu 0, memory 0, 0 of 0 nodes", wantSmall: "cpu 0, memory 0, 0 of 0 nodes"},
	} {
		before := r.snapshot()
		r.set(step.name, step.node)
		after := r.snapshot()
		if (after == before) != step.same {
			t.Fatalf("step %d (%s): snapshot kept: %v, want %v", i, step.name, after == before, step.same)
		}
		if again := r.snapshot(); again != after {
			t.Fatalf("step %d (%s): a second read with no change between made another snapshot", i, step.name)
		}
		if got := roomLine(after, backend.Spec{}); got != step.want {
			t.Fatalf("step %d (%s): room %s, want %s", i, step.name, got, step.want)
		}
		if got := roomLine(after, small); got != step.wantSmall {
			t.Fatalf("step %d (%s): room for size=small %s, want %s", i, step.name, got, step.wantSmall)
		}
	}
}

// TestRoomWatched: with nodes watched, Hosts are the nodes as the informer shows them, their
// labels and taints kept through the informer's transform, and follow a cordon, a change of
// allocatable, a label, a taint and a deletion; a heartbeat keeps the snapshot; without nodes
// watched, the hosts are unknown.
func TestRoomWatched(t *testing.T) {
	client := kubefake.NewClientset(labelled(roomNode("n1", "32", "128Gi", false), map[string]string{"size": "small"}),
		roomNode("n2", "64", "512Gi", true))
	b, _ := started(t, Config{Client: client, WatchNodes: true})
	awaitRoom(t, b, backend.Spec{}, "cpu 32, memory 128Gi, 1 of 2 nodes")
	awaitRoom(t, b, small, "cpu 32, memory 128Gi, 1 of 2 nodes")

	ctx := t.Context()
	nodes := client.CoreV1().Nodes()
	update := func(n *corev1.Node) {
		t.Helper()
		if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update(roomNode("n2", "64", "512Gi", false))
	awaitRoom(t, b, backend.Spec{}, "cpu 64, memory 512Gi, 2 of 2 nodes")
	update(roomNode("n2", "8", "512Gi", false))
	awaitRoom(t, b, backend.Spec{}, "cpu 32, memory 512Gi, 2 of 2 nodes")
	update(labelled(roomNode("n2", "8", "512Gi", false), map[string]string{"size": "small"}))
	awaitRoom(t, b, small, "cpu 32, memory 512Gi, 2 of 2 nodes")
	update(tainted(labelled(roomNode("n2", "8", "512Gi", false), map[string]string{"size": "small"}), "dedicated", corev1.TaintEffectNoExecute))
	awaitRoom(t, b, small, "cpu 32, memory 128Gi, 1 of 2 nodes")
	if err := nodes.Delete(ctx, "n2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitRoom(t, b, backend.Spec{}, "cpu 32, memory 128Gi, 1 of 1 nodes")
	update(labelled(roomNode("n1", "32", "128Gi", true), map[string]string{"size": "small"}))
	awaitRoom(t, b, backend.Spec{}, "cpu 0, memory 0, 0 of 1 nodes")

	unwatched, _ := started(t, Config{Client: kubefake.NewClientset(roomNode("n1", "32", "128Gi", false))})
	if got := unwatched.Hosts(); got != nil {
		t.Errorf("nodes not watched: room %s, want unknown", roomLine(got, backend.Spec{}))
	}
}

// awaitRoom waits until the room b's hosts have for spec is want, as the node informer brings
// each change. The limit only stops a test that would otherwise hang.
func awaitRoom(t *testing.T, b *Backend, spec backend.Spec, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for got := roomLine(b.Hosts(), spec); got != want; got = roomLine(b.Hosts(), spec) {
		if time.Now().After(deadline) {
			t.Fatalf("room %s, want %s", got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRoomsSnapshotOnRead: nodes set one after another, as the first list of a cluster's
// nodes comes, make no snapshot until one is read, and then one of them all: the list costs
// one snapshot, not one per node.
func TestRoomsSnapshotOnRead(t *testing.T) {
	r := newRooms()
	empty := r.hosts.Load()
	for i := range 100 {
		r.set(fmt.Sprintf("n%03d", i), roomNode(fmt.Sprintf("n%03d", i), "8", "16Gi", false))
	}
	if r.hosts.Load() != empty {
		t.Fatal("a snapshot was made before any read")
	}
	if got := r.snapshot().Len(); got != 100 {
		t.Fatalf("the snapshot read after 100 nodes has %d", got)
	}
}
