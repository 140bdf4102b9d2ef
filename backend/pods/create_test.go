package pods

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// TestCreateRefused: a pod the API server refuses is ErrRejected (the VM fails with a reason),
// unless the refusal is that the namespace is being deleted: the VM goes with it, so that is
// a transient error and no failure.
func TestCreateRefused(t *testing.T) {
	podGR := schema.GroupResource{Resource: "pods"}
	terminating := apierrors.NewForbidden(podGR, "vm-server", errors.New("unable to create new content in namespace ns because it is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace ns is being terminated", Field: "metadata.namespace"}}
	tests := map[string]struct {
		answer   error
		rejected bool
	}{
		"namespace terminating": {terminating, false},
		"quota":                 {apierrors.NewForbidden(podGR, "vm-server", errors.New("exceeded quota: compute")), true},
		"invalid":               {apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "vm-server", field.ErrorList{field.Invalid(field.NewPath("spec"), "x", "bad")}), true},
		"unavailable":           {apierrors.NewServiceUnavailable("etcd"), false},
	}
	spec := backend.Spec{CPU: resource.MustParse("1"), Memory: resource.MustParse("1G"), RootDisk: resource.MustParse("1G"), Image: "img:1"}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := fakeClient(t)
			client.PrependReactor("create", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.answer
			})
			b := cachedBackend(t, client)
			_, err := b.Create(context.Background(), resizeOwner, spec)
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, backend.ErrRejected); got != tc.rejected {
				t.Errorf("rejected %v, want %v: %v", got, tc.rejected, err)
			}
		})
	}
}

// TestCreateMarksRestart: a server created to carry out a restart request carries the
// request's value as an annotation of its pod, and Observe reads it back from the cache, in
// the compact fields where the value is a time in the form `kubectl vm restart` writes; a
// server created for no request carries none. The mark is no part of the spec's equality.
func TestCreateMarksRestart(t *testing.T) {
	const request = "2026-06-01T11:59:30Z"
	for name, restart := range map[string]string{"restart": request, "no request": "", "any text": "soon, please"} {
		t.Run(name, func(t *testing.T) {
			client := fakeClient(t)
			spec := backend.Spec{CPU: resource.MustParse("1"), Memory: resource.MustParse("1G"), RootDisk: resource.MustParse("1G"), Image: "img:1",
				Restart: restart}
			created, err := New(Config{Client: client}).Create(context.Background(), resizeOwner, spec)
			if err != nil {
				t.Fatal(err)
			}
			pod, err := client.CoreV1().Pods(resizeOwner.Namespace).Get(context.Background(), PodName(resizeOwner.Name), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := pod.Annotations[AnnotationRestart]; got != restart || ok != (restart != "") {
				t.Errorf("annotation %s %q (set: %v), want %q", AnnotationRestart, got, ok, restart)
			}
			pod.UID, pod.ResourceVersion = "7c433542-8907-45fe-887a-7813523dba9e", "12"
			c := cachePod(pod)
			if compact := c.flags&exactServer == 0; compact != (restart != "soon, please") {
				t.Errorf("the server kept in the compact fields: %v, want %v", compact, !compact)
			}
			seen, err := cachedBackend(t, client, pod).Observe(resizeOwner)
			if err != nil || seen == nil {
				t.Fatalf("observe: %+v, %v", seen, err)
			}
			if created.Spec.Restart != restart || seen.Spec.Restart != restart {
				t.Errorf("created with restart %q, observed %q; want %q", created.Spec.Restart, seen.Spec.Restart, restart)
			}
			unmarked := spec
			unmarked.Restart = ""
			if !seen.Spec.Equal(unmarked) {
				t.Errorf("the observed spec %+v is not equal to the one asked for without the mark", seen.Spec)
			}
		})
	}
}
