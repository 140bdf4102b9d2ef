package pods

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
)

// PodSecurity is the securityContext the backend gives the server pods it makes, named for the
// Pod Security Standard (https://kubernetes.io/docs/concepts/security/pod-security-standards/)
// it makes them meet.
//
// It is the operator's choice, and none unless chosen, because restricted asks of the image
// what not every image gives: to run as a user other than root, with no capability beyond
// NET_BIND_SERVICE. Made so always, a server that needs root (an image without a USER, a
// server that changes the owner of its files) would fail to start or to work in every
// namespace, the many that enforce no standard included.
//
// The securityContext is no part of the server's spec (serverOf does not read it back, and
// backend.Spec has no field for it): a change of the setting is taken by the servers made from
// then on, and no running server is replaced for it. A pod's securityContext cannot be changed
// in place, and a controller's flag flipped must not reboot every VM; a VM's restart (kubectl
// vm restart) gives it a server of the setting of the day.
type PodSecurity string

// The settings.
const (
	// PodSecurityNone gives no securityContext: the server runs as its image says (as root,
	// if it says nothing), with the runtime's default capabilities. Such a pod meets the
	// baseline standard (no host namespace, port or path, no privilege, no capability added),
	// not the restricted one. "" reads as none.
	PodSecurityNone PodSecurity = "none"
	// PodSecurityRestricted makes the pod meet the restricted standard: the pod runs as
	// non-root with the runtime's default seccomp profile, and the server container drops
	// every capability and may not gain privileges. The image must say a numeric user other
	// than 0 (USER 65532): the kubelet refuses to start one that would run as root, or as a
	// named user it cannot tell from root (CreateContainerConfigError); no user is chosen for
	// the image here, since which one a VM's image can run as is the image's to say.
	PodSecurityRestricted PodSecurity = "restricted"
)

// Valid reports whether s is one of the settings; "" is not (a flag's default is none).
func (s PodSecurity) Valid() bool {
	return s == PodSecurityNone || s == PodSecurityRestricted
}

// secure gives pod the securityContext of s: none for PodSecurityNone (and ""); for
// PodSecurityRestricted, runAsNonRoot and the RuntimeDefault seccomp profile on the pod, so
// that they hold for every container, a sidecar that something injects included, and on the
// server container no privilege escalation and no capability, which the restricted standard
// asks of each container (a pod-level setting of them does not exist).
func (s PodSecurity) secure(pod *corev1.Pod) {
	if s != PodSecurityRestricted {
		return
	}
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == ContainerName {
			pod.Spec.Containers[i].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
		}
	}
}

// podSecurityHint ends the refusal of a pod that a namespace's Pod Security admission
// refused, made without the restricted setting: the way out, where the message is read.
const podSecurityHint = "run the controller with --server-pod-security=restricted to make server pods that the restricted Pod Security Standard admits (docs/deploying.md)"

// refusalHint is what to add to the API server's refusal err of a pod made with s: the way
// out when it is Pod Security admission's and s is not restricted, else "". The admission
// words its refusal `pods "x" is forbidden: violates PodSecurity "restricted:latest": ...`;
// another admission's refusal (a quota, a webhook) is not its to answer.
func (s PodSecurity) refusalHint(err error) string {
	if s == PodSecurityRestricted || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
		return ""
	}
	return podSecurityHint
}
