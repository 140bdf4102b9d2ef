package reconcile

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

func TestWarningsOnly(t *testing.T) {
	fake := events.NewFakeRecorder(10)
	r := WarningsOnly(fake)
	ref := &corev1.ObjectReference{Kind: "VirtualMachine", Name: "a"}
	r.Eventf(ref, nil, corev1.EventTypeNormal, decision.ReasonCreatingServer, "CreateServer", "Creating a server")
	r.Eventf(ref, nil, corev1.EventTypeWarning, decision.ReasonServerFailed, "UpdateStatus", "Server %s failed", "a-server")
	close(fake.Events)
	var got []string
	for e := range fake.Events {
		got = append(got, e)
	}
	if len(got) != 1 || got[0] != "Warning ServerFailed Server a-server failed" {
		t.Errorf("recorded %q; want only the Warning", got)
	}
}
