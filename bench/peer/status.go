package main

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

// status is what the peer reports about a VM: the fields vm-controller writes (its
// schema.Status), with the same values, so that both controllers store the same object. It is
// also the body of the status patch: a JSON merge patch of exactly these fields.
type status struct {
	Phase   string `json:"phase"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Server is null in the patch when there is none, so that a server that went is not
	// left behind in the status.
	Server             *serverStatus `json:"server"`
	ObservedGeneration int64         `json:"observedGeneration"`
	LastUpdateTime     string        `json:"lastUpdateTime,omitempty"`
	Conditions         []condition   `json:"conditions"`
}

// serverStatus names the VM's pod, repeats its phase and says where it runs: its node and
// address, null until the pod has them, so that a replaced pod's are not left behind.
type serverStatus struct {
	Name  string  `json:"name"`
	ID    string  `json:"id"`
	State string  `json:"state"`
	Node  *string `json:"node"`
	IP    *string `json:"ip"`
}

// condition is a metav1.Condition as the API stores it.
type condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime"`
	Reason             string `json:"reason"`
	Message            string `json:"message"`
}

// report is the status a VM should have: the phase, reason and message, the pod it runs on
// (nil: none), with its conditions as vm-controller writes them for the same state (its
// reconcile/decision/kstatus.go): Ready, with Reconciling beside it while the VM is on its
// way (Creating, Terminating) and Stalled when it failed (the peer retries nothing), and no
// condition at all when it is Inactive at rest. now is the time of a change: a condition
// keeps its transition time when its status stays, and lastUpdateTime is now.
func report(vm *unstructured.Unstructured, phase, reason, msg string, pod *corev1.Pod, now time.Time) status {
	stamp := now.UTC().Format(time.RFC3339)
	st := status{Phase: phase, Reason: reason, Message: msg, ObservedGeneration: vm.GetGeneration(), LastUpdateTime: stamp}
	if pod != nil {
		st.Server = &serverStatus{Name: pod.Name, ID: string(pod.UID), State: string(pod.Status.Phase),
			Node: orNull(pod.Spec.NodeName), IP: orNull(pod.Status.PodIP)}
	}
	ready := condition{Type: "Ready", Status: "False"}
	switch phase {
	case "Active":
		ready.Status = "True"
	case "Unknown":
		ready.Status = "Unknown"
	}
	st.Conditions = []condition{ready}
	switch phase {
	case "Creating", "Terminating":
		st.Conditions = append(st.Conditions, condition{Type: "Reconciling", Status: "True"})
	case "Failed":
		st.Conditions = append(st.Conditions, condition{Type: "Stalled", Status: "True"})
	case "Inactive":
		st.Conditions = nil
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		c.ObservedGeneration, c.Reason, c.Message, c.LastTransitionTime = st.ObservedGeneration, reason, msg, stamp
		if old, ok := currentCondition(vm, c.Type); ok && old.Status == c.Status && old.LastTransitionTime != "" {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
	return st
}

// orNull is s, or nil (null in the patch) for "".
func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// sameAs reports whether the VM's status already says what st says, whenever it was written:
// lastUpdateTime and the transition time are left out, so that a reconcile that finds nothing
// new writes nothing. While the VM is Creating and stays so, a pod's node and address are
// left out too: a pod is placed and given an address before it is ready, and vm-controller
// writes them with the status its readiness brings rather than a write for each.
func (st status) sameAs(vm *unstructured.Unstructured) bool {
	cur, _ := vm.Object["status"].(map[string]any)
	if str(cur, "phase") != st.Phase || str(cur, "reason") != st.Reason || str(cur, "message") != st.Message ||
		integer(cur, "observedGeneration") != st.ObservedGeneration {
		return false
	}
	srv, _ := cur["server"].(map[string]any)
	switch {
	case st.Server == nil && srv != nil, st.Server != nil && srv == nil:
		return false
	case st.Server != nil && (str(srv, "name") != st.Server.Name || str(srv, "id") != st.Server.ID || str(srv, "state") != st.Server.State):
		return false
	case st.Server != nil && !(st.Phase == "Creating" && str(cur, "phase") == "Creating") &&
		(str(srv, "node") != ptr.Deref(st.Server.Node, "") || str(srv, "ip") != ptr.Deref(st.Server.IP, "")):
		return false
	}
	conds, _ := cur["conditions"].([]any)
	if len(conds) != len(st.Conditions) {
		return false
	}
	for i, c := range st.Conditions {
		have, _ := conds[i].(map[string]any)
		if str(have, "type") != c.Type || str(have, "status") != c.Status || str(have, "reason") != c.Reason ||
			str(have, "message") != c.Message || integer(have, "observedGeneration") != c.ObservedGeneration {
			return false
		}
	}
	return true
}

// patch is st as a merge patch of the status subresource. It carries no resourceVersion: the
// reconcile decides from a pod cache that only moves forward, so a status written from a VM
// view that missed the controller's own last write is still the newest one.
func (st status) patch() ([]byte, error) {
	b, err := json.Marshal(struct {
		Status status `json:"status"`
	}{st})
	if err != nil {
		return nil, fmt.Errorf("render status: %w", err)
	}
	return b, nil
}

// finalizerPatch is a merge patch that sets the VM's finalizers to have ours or not, keeping
// everyone else's, on the condition that the VM is still at resourceVersion rv: the list is
// replaced whole, so a write from a stale view must fail (409) rather than drop another
// controller's finalizer added meanwhile. vm-controller writes the same patch.
func finalizerPatch(vm *unstructured.Unstructured, add bool) ([]byte, error) {
	var p struct {
		Metadata struct {
			Finalizers      []string `json:"finalizers"`
			ResourceVersion string   `json:"resourceVersion"`
		} `json:"metadata"`
	}
	p.Metadata.Finalizers = []string{}
	for _, f := range vm.GetFinalizers() {
		if f != finalizer {
			p.Metadata.Finalizers = append(p.Metadata.Finalizers, f)
		}
	}
	if add {
		p.Metadata.Finalizers = append(p.Metadata.Finalizers, finalizer)
	}
	p.Metadata.ResourceVersion = vm.GetResourceVersion()
	b, err := json.Marshal(&p)
	if err != nil {
		return nil, fmt.Errorf("render finalizers: %w", err)
	}
	return b, nil
}

// currentCondition is the VM's condition of type typ as stored, if it has one.
func currentCondition(vm *unstructured.Unstructured, typ string) (condition, bool) {
	cur, _ := vm.Object["status"].(map[string]any)
	conds, _ := cur["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && str(m, "type") == typ {
			return condition{Type: typ, Status: str(m, "status"), LastTransitionTime: str(m, "lastTransitionTime")}, true
		}
	}
	return condition{}, false
}

// str and integer read a field of a decoded JSON object without copying it (the cache's
// objects are shared, see reconcile).
func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func integer(m map[string]any, key string) int64 {
	switch v := m[key].(type) {
	case int64:
		return v
	case float64:
		return int64(v)
	}
	return 0
}
