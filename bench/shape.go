package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The side-by-side is only fair if both controllers do the same work: the same pod and the
// same status for each VM. The peer is written to match vm-controller, so a field one of them
// gains is easy to miss (the peer's status once lacked the server's node and address, which cost
// the API server a little more for vm-controller's VMs than for the peer's, unseen). compare
// reads one VM and its pod after each contender's first burst and prints where their shapes
// differ from the peer's.

// workShape is what a controller made for one VM, as the set of its fields' paths (values
// left out: names, UIDs and times differ from run to run): the VM's status, and the pod's spec,
// labels, annotations and owners.
type workShape struct {
	vm, pod []string
}

// shapeOf reads the shape of the work done for the VM named name in e's namespace.
func shapeOf(e *env, name string) (workShape, error) {
	ctx := context.Background()
	vm, err := e.dyn.Resource(vmGVR).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return workShape{}, fmt.Errorf("read VM %s: %w", name, err)
	}
	status, _ := vm.Object["status"].(map[string]any)
	pod, err := e.kube.CoreV1().Pods(e.ns).Get(ctx, name+"-server", metav1.GetOptions{})
	if err != nil {
		return workShape{}, fmt.Errorf("read the pod of VM %s: %w", name, err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
	if err != nil {
		return workShape{}, fmt.Errorf("read the pod of VM %s: %w", name, err)
	}
	meta, _ := u["metadata"].(map[string]any)
	made := map[string]any{"spec": u["spec"], "metadata": map[string]any{
		"labels": meta["labels"], "annotations": meta["annotations"], "ownerReferences": meta["ownerReferences"]}}
	return workShape{vm: paths("status", status), pod: paths("", made)}, nil
}

// paths lists the paths of v's leaves under prefix, sorted: a map's keys joined by dots, a
// list's items as [] (the union of their paths).
func paths(prefix string, v any) []string {
	seen := map[string]bool{}
	var walk func(p string, v any)
	walk = func(p string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(strings.TrimPrefix(p+"."+k, "."), e)
			}
		case []any:
			for _, e := range v {
				walk(p+"[]", e)
			}
		case nil:
		default:
			seen[p] = true
		}
	}
	walk(prefix, v)
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// diff says how a's shape differs from the peer's: each side's paths the other lacks, or
// "" if they are the same.
func (a workShape) diff(peer workShape) string {
	var parts []string
	for _, s := range []struct {
		what     string
		mine, cr []string
	}{{"VM status", a.vm, peer.vm}, {"pod", a.pod, peer.pod}} {
		if only := minus(s.mine, s.cr); len(only) > 0 {
			parts = append(parts, fmt.Sprintf("%s fields only it has: %s", s.what, strings.Join(only, ", ")))
		}
		if only := minus(s.cr, s.mine); len(only) > 0 {
			parts = append(parts, fmt.Sprintf("%s fields only the peer has: %s", s.what, strings.Join(only, ", ")))
		}
	}
	return strings.Join(parts, "; ")
}

// minus is the paths of a that b lacks.
func minus(a, b []string) []string {
	var out []string
	for _, p := range a {
		if !slices.Contains(b, p) {
			out = append(out, p)
		}
	}
	return out
}
