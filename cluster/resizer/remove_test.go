package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// newTestResizer is a resizer over a fake clientset whose caches hold the pods, nodes, Leases,
// claims and volumes given; its informers never run.
func newTestResizer(t *testing.T, objs ...runtime.Object) (*resizer, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	r := newResizer(client, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Pod:
			err = r.pods.GetIndexer().Add(o)
		case *corev1.Node:
			err = r.nodes.GetIndexer().Add(o)
		case *coordinationv1.Lease:
			err = r.leases.GetIndexer().Add(o)
		case *corev1.PersistentVolumeClaim:
			err = r.claims.GetIndexer().Add(o)
		case *corev1.PersistentVolume:
			err = r.volumes.GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return r, client
}

func kwokNode(name, manager string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if manager != "" {
		n.Annotations = map[string]string{kwokNodeAnnotation: manager}
	}
	return n
}

func terminating(p *corev1.Pod) *corev1.Pod {
	p.DeletionTimestamp = &metav1.Time{Time: t0}
	return p
}

// deletes lists the pod deletions a fake clientset was asked for.
func deletes(c *fake.Clientset) []k8stesting.DeleteActionImpl {
	var out []k8stesting.DeleteActionImpl
	for _, a := range c.Actions() {
		if d, ok := a.(k8stesting.DeleteActionImpl); ok && d.GetResource().Resource == "pods" {
			out = append(out, d)
		}
	}
	return out
}

// nodeLease is the Lease of node in kube-node-lease, held by holder.
func nodeLease(node, holder string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: corev1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
}

// TestRemove: a terminating pod on a kwok node is deleted at once, on the condition of its UID;
// a running pod, one on a node a real kubelet runs, or one on a node a test has lost, is not.
func TestRemove(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "vm-server"}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		manager string // the node's kwok annotation
		holder  string // the holder of the node's Lease; "": no Lease
		deleted bool
	}{
		{"terminating on a kwok node", terminating(kwokPod("1", "1G")), "fake", "kwok-1", true},
		{"terminating on a new kwok node without a Lease", terminating(kwokPod("1", "1G")), "fake", "", true},
		{"running on a kwok node", kwokPod("1", "1G"), "fake", "kwok-1", false},
		{"terminating on a real node", terminating(kwokPod("1", "1G")), "", "", false},
		{"terminating on a lost node", terminating(kwokPod("1", "1G")), "fake", LostHolder, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{tc.pod, kwokNode(tc.pod.Spec.NodeName, tc.manager)}
			if tc.holder != "" {
				objs = append(objs, nodeLease(tc.pod.Spec.NodeName, tc.holder))
			}
			r, client := newTestResizer(t, objs...)
			client.ClearActions()
			if _, err := r.handlePod(context.Background(), key); err != nil {
				t.Fatal(err)
			}
			got := deletes(client)
			if !tc.deleted {
				if len(got) != 0 {
					t.Fatalf("deleted %v; want no deletion", got)
				}
				return
			}
			if len(got) != 1 || got[0].Name != "vm-server" || got[0].Namespace != "ns" {
				t.Fatalf("deletions %v; want one of ns/vm-server", got)
			}
			opts := got[0].DeleteOptions
			if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != "pod-uid" {
				t.Errorf("preconditions %+v; want the pod's UID", opts.Preconditions)
			}
			if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 {
				t.Errorf("grace period %v; want 0", opts.GracePeriodSeconds)
			}
			if _, err := client.CoreV1().Pods("ns").Get(context.Background(), "vm-server", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the pod is still there: %v", err)
			}
		})
	}
}

// TestRemoveNewerPod: when the name belongs to a newer pod by the time the delete arrives, the
// API server refuses it on the UID (Conflict); that is the end of the old pod, not an error.
func TestRemoveNewerPod(t *testing.T) {
	old := terminating(kwokPod("1", "1G"))
	r, client := newTestResizer(t, old, kwokNode(old.Spec.NodeName, "fake"))
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		opts := a.(k8stesting.DeleteActionImpl).DeleteOptions
		if opts.Preconditions != nil && opts.Preconditions.UID != nil && *opts.Preconditions.UID != "newer-uid" {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "vm-server", nil)
		}
		return false, nil, nil
	})
	after, err := r.handlePod(context.Background(), cache.ObjectName{Namespace: "ns", Name: "vm-server"})
	if err != nil || after != 0 {
		t.Fatalf("handle: %v, %v; want no error and nothing to look at again", after, err)
	}
	if n := len(deletes(client)); n != 1 {
		t.Fatalf("%d deletions; want 1", n)
	}
}
