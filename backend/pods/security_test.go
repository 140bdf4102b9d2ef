package pods

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// TestCreatePodSecurity: the pod Create makes has no securityContext unless the backend is
// set to restricted, and then the one the restricted Pod Security Standard asks for: the pod
// runs as non-root with the RuntimeDefault seccomp profile, the server container may not gain
// privileges and drops every capability. Either way the pod reads back, from the cache and
// as Create returns it, as the same server with the spec asked for, in the compact fields:
// the setting is no part of the spec, so no server is replaced when it changes.
func TestCreatePodSecurity(t *testing.T) {
	restricted := &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	restrictedServer := &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	tests := map[string]struct {
		setting PodSecurity
		disk    bool
		pod     *corev1.PodSecurityContext // the pod's securityContext; nil: none
		server  *corev1.SecurityContext    // the server container's
	}{
		"unset":              {setting: ""},
		"none":               {setting: PodSecurityNone},
		"restricted":         {setting: PodSecurityRestricted, pod: restricted, server: restrictedServer},
		"restricted on disk": {setting: PodSecurityRestricted, disk: true, pod: restricted, server: restrictedServer},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec := backend.Spec{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi"), Image: "img:1", Disk: tc.disk}
			if !tc.disk {
				spec.RootDisk = resource.MustParse("10Gi")
			}
			client := fakeClient(t)
			created, err := New(Config{Client: client, PodSecurity: tc.setting}).Create(context.Background(), resizeOwner, spec)
			if err != nil {
				t.Fatal(err)
			}
			pod, err := client.CoreV1().Pods(resizeOwner.Namespace).Get(context.Background(), PodName(resizeOwner.Name), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(pod.Spec.SecurityContext, tc.pod) {
				t.Errorf("the pod's securityContext is %+v, want %+v", pod.Spec.SecurityContext, tc.pod)
			}
			if c := pod.Spec.Containers[0]; c.Name != ContainerName || !reflect.DeepEqual(c.SecurityContext, tc.server) {
				t.Errorf("container %s has securityContext %+v, want %+v", c.Name, c.SecurityContext, tc.server)
			}

			// Read back as the server a pod made without the setting reads as.
			plain := newPod(resizeOwner, spec)
			for _, p := range []*corev1.Pod{pod, plain} {
				p.UID, p.ResourceVersion = "7c433542-8907-45fe-887a-7813523dba9e", "12"
			}
			if c := cachePod(pod); c.flags&exactServer != 0 {
				t.Errorf("the pod is cached as it was read (exact), not in the compact fields: %+v", c.exact)
			}
			if got, want := cachePod(pod).observed(nil), cachePod(plain).observed(nil); !reflect.DeepEqual(got, want) {
				t.Errorf("cached, the pod reads as\n%+v\nwant, as a pod made without the setting,\n%+v", got, want)
			}
			if got, want := serverOf(pod), serverOf(plain); !reflect.DeepEqual(got, want) {
				t.Errorf("the pod reads as\n%+v\nwant, as a pod made without the setting,\n%+v", got, want)
			}
			if !created.Spec.Equal(spec) || !serverOf(pod).Spec.Equal(spec) {
				t.Errorf("created as %+v, read back as %+v; want %+v", created.Spec, serverOf(pod).Spec, spec)
			}
		})
	}
}

// TestPodSecurityChangeKeepsServers: a server made under one setting, observed by a backend of
// the other (the controller restarted with the flag changed), has the spec it was made with,
// so the decision sees nothing to replace it for.
func TestPodSecurityChangeKeepsServers(t *testing.T) {
	spec := backend.Spec{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi"), RootDisk: resource.MustParse("40G"), Image: "img:1"}
	settings := []PodSecurity{PodSecurityNone, PodSecurityRestricted}
	for _, from := range settings {
		for _, to := range settings {
			pod := newPod(resizeOwner, spec)
			from.secure(pod)
			pod.UID, pod.ResourceVersion, pod.Spec.NodeName = "pod-uid", "3", "n1"
			pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
			b := New(Config{Client: fakeClient(t), PodSecurity: to})
			if err := b.pods.Add(cachePod(pod)); err != nil {
				t.Fatal(err)
			}
			srv, err := b.Observe(resizeOwner)
			if err != nil || srv == nil {
				t.Fatalf("%s to %s: observe %+v, %v", from, to, srv, err)
			}
			if srv.State != backend.StateReady || !srv.Spec.Equal(spec) {
				t.Errorf("a server made %s, observed under %s: %s with spec %+v; want Ready with %+v", from, to, srv.State, srv.Spec, spec)
			}
		}
	}
}

// TestCreateRefusedPodSecurity: a pod that Pod Security admission refuses is ErrRejected, and
// without the restricted setting the refusal names the way out. With it (a pod the admission
// refuses all the same: a sidecar something injected), and for any other refusal, it says
// only what the API server said.
func TestCreateRefusedPodSecurity(t *testing.T) {
	podGR := schema.GroupResource{Resource: "pods"}
	psa := apierrors.NewForbidden(podGR, "vm-server", errors.New(`violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "server" must set securityContext.allowPrivilegeEscalation=false), runAsNonRoot != true (pod or container "server" must set securityContext.runAsNonRoot=true)`))
	quota := apierrors.NewForbidden(podGR, "vm-server", errors.New("exceeded quota: compute"))
	tests := map[string]struct {
		setting PodSecurity
		answer  error
		hint    bool
	}{
		"pod security, unset":      {"", psa, true},
		"pod security, none":       {PodSecurityNone, psa, true},
		"pod security, restricted": {PodSecurityRestricted, psa, false},
		"quota":                    {PodSecurityNone, quota, false},
	}
	spec := backend.Spec{CPU: resource.MustParse("1"), Memory: resource.MustParse("1G"), RootDisk: resource.MustParse("1G"), Image: "img:1"}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := fakeClient(t)
			client.PrependReactor("create", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.answer
			})
			_, err := New(Config{Client: client, PodSecurity: tc.setting}).Create(context.Background(), resizeOwner, spec)
			if !errors.Is(err, backend.ErrRejected) || !strings.Contains(err.Error(), tc.answer.Error()) {
				t.Fatalf("got %v, want a rejection quoting %q", err, tc.answer)
			}
			if got := strings.HasSuffix(err.Error(), "; "+podSecurityHint); got != tc.hint {
				t.Errorf("names --server-pod-security: %v, want %v: %v", got, tc.hint, err)
			}
		})
	}
}

// TestPodSecurityValid: the settings, and nothing else, are valid; "" is not a setting a
// flag can give (the flag's default is none).
func TestPodSecurityValid(t *testing.T) {
	for s, want := range map[PodSecurity]bool{PodSecurityNone: true, PodSecurityRestricted: true, "": false, "baseline": false, "Restricted": false} {
		if got := s.Valid(); got != want {
			t.Errorf("PodSecurity(%q).Valid() = %v, want %v", s, got, want)
		}
	}
}
