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

// roomNode is a node of the allocatable cpu and memory given, cordoned or not.
func roomNode(name, cpu, memory string, cordoned bool) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: cordoned},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("110")}}}
}

// roomLine is a room as a test compares it.
func roomLine(r *backend.Room) string {
	if r == nil {
		return "unknown"
	}
	return fmt.Sprintf("cpu %s, memory %s, %d nodes", r.CPU.String(), r.Memory.String(), r.Hosts)
}

// TestRoomsSet: the room follows nodes added, changed, cordoned, uncordoned and deleted; the
// largest cpu and the largest memory may be two nodes' figures, and once the node that held
// one shrinks or goes, the next largest takes its place.
func TestRoomsSet(t *testing.T) {
	r := newRooms()
	for i, step := range []struct {
		name string
		node *corev1.Node // nil: deleted
		want string
	}{
		{"n1", roomNode("n1", "32", "128Gi", false), "cpu 32, memory 128Gi, 1 nodes"},
		{"n2", roomNode("n2", "16", "256Gi", false), "cpu 32, memory 256Gi, 2 nodes"},
		{"n2", roomNode("n2", "16", "256Gi", false), "cpu 32, memory 256Gi, 2 nodes"}, // a heartbeat
		{"n1", roomNode("n1", "32", "128Gi", true), "cpu 16, memory 256Gi, 1 nodes"},  // cordoned
		{"n3", roomNode("n3", "64", "512Gi", true), "cpu 16, memory 256Gi, 1 nodes"},  // cordoned from the start
		{"n1", roomNode("n1", "32", "128Gi", false), "cpu 32, memory 256Gi, 2 nodes"}, // uncordoned
		{"n2", roomNode("n2", "16", "64Gi", false), "cpu 32, memory 128Gi, 2 nodes"},  // shrank
		{"n2", roomNode("n2", "48", "64Gi", false), "cpu 48, memory 128Gi, 2 nodes"},  // grew
		{"n2", nil, "cpu 32, memory 128Gi, 1 nodes"},
		{"n3", nil, "cpu 32, memory 128Gi, 1 nodes"}, // a cordoned node going changes nothing
		{"n1", nil, "cpu 0, memory 0, 0 nodes"},
	} {
		r.set(step.name, step.node)
		if got := roomLine(r.room.Load()); got != step.want {
			t.Fatalf("step %d (%s): room %s, want %s", i, step.name, got, step.want)
		}
	}
}

// TestRoomWatched: with nodes watched, Room is the largest allocatable cpu and memory of the
// nodes not cordoned as the informer shows them, and follows a cordon, a change of
// allocatable and a deletion; without, it is unknown.
func TestRoomWatched(t *testing.T) {
	client := kubefake.NewClientset(roomNode("n1", "32", "128Gi", false), roomNode("n2", "64", "512Gi", true))
	b, _ := started(t, Config{Client: client, WatchNodes: true})
	awaitRoom(t, b, "cpu 32, memory 128Gi, 1 nodes")

	ctx := t.Context()
	nodes := client.CoreV1().Nodes()
	if _, err := nodes.Update(ctx, roomNode("n2", "64", "512Gi", false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitRoom(t, b, "cpu 64, memory 512Gi, 2 nodes")
	if _, err := nodes.Update(ctx, roomNode("n2", "8", "512Gi", false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitRoom(t, b, "cpu 32, memory 512Gi, 2 nodes")
	if err := nodes.Delete(ctx, "n2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitRoom(t, b, "cpu 32, memory 128Gi, 1 nodes")
	if _, err := nodes.Update(ctx, roomNode("n1", "32", "128Gi", true), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitRoom(t, b, "cpu 0, memory 0, 0 nodes")

	unwatched, _ := started(t, Config{Client: kubefake.NewClientset(roomNode("n1", "32", "128Gi", false))})
	if got := unwatched.Room(); got != nil {
		t.Errorf("nodes not watched: room %s, want unknown", roomLine(got))
	}
}

// awaitRoom waits until b's room is want, as the node informer brings each change. The limit
// only stops a test that would otherwise hang.
func awaitRoom(t *testing.T, b *Backend, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for got := roomLine(b.Room()); got != want; got = roomLine(b.Room()) {
		if time.Now().After(deadline) {
			t.Fatalf("room %s, want %s", got, want)
		}
		time.Sleep(time.Millisecond)
	}
}
