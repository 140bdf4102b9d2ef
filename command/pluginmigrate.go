// The migrate verb's client side: checks that a move can happen, then writes the request
// (the annotation cloudnative.czs/migrateRequestedAt) that the controller carries out (a
// cold migration: the server is deleted and a new one made on another node, with the same
// disk). A move that cannot happen is refused here, with one line, and nothing is written.

package command

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/cloudnative-czs/vm-controller/backend/pods"
	"github.com/cloudnative-czs/vm-controller/schema"
)

func migrateVMCommand(c *pluginConfig, version string) *cli.Command {
	return &cli.Command{
		Name:      "migrate",
		Usage:     "move a running VM to another node (a cold migration: a new server, the same disk)",
		ArgsUsage: "NAME",
		Description: "Checks that the VM runs (phase Active, its server on a node), that its disk can follow (its volume is not pinned to " +
			"nodes; an ephemeral disk always follows) and that another Ready, schedulable node exists that the VM's placement admits (with the tolerations admission gave its server pod); then writes the annotation " +
			schema.AnnotationMigrateRequestedAt + " with the time, which the controller acts on once. Otherwise it refuses and changes nothing.",
		Flags: c.flags(),
		Action: action(c, oneName, func(cc *cli.Context) error {
			v, name, err := c.connect(cc, version)
			if err != nil {
				return err
			}
			return v.migrate(cc.Context, name)
		}),
	}
}

// migrate checks and writes the migration request of the VM name; a VM that changed meanwhile
// is read and checked again (vmClient.write).
func (v *vmClient) migrate(ctx context.Context, name string) error {
	var source, at string
	err := v.write(ctx, name, func(vm schema.VirtualMachine) (map[string]any, error) {
		if err := migrateRequest.unrecorded(vm.Name(), v.fields); err != nil {
			return nil, err
		}
		var err error
		if source, err = v.migrationSource(ctx, vm); err != nil {
			return nil, err
		}
		at = v.now().UTC().Format(requestTimeLayout)
		return annotations(map[string]any{schema.AnnotationMigrateRequestedAt: at}), nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(v.out, "virtualmachine/%s migration requested from node %s (%s=%s)\n", name, source, schema.AnnotationMigrateRequestedAt, at)
	return nil
}

// migrationSource checks that vm can migrate and returns the node its server is on.
func (v *vmClient) migrationSource(ctx context.Context, vm schema.VirtualMachine) (string, error) {
	name, st := vm.Name(), vm.Status()
	if vm.Paused() {
		// Its status says nothing of now, and a move checked against today's nodes would be
		// carried out whenever it is resumed.
		return "", refuse("virtualmachine/%s is paused (%s): the controller leaves it alone; resume it first: kubectl annotate vm %s %s-",
			name, schema.AnnotationPaused, name, schema.AnnotationPaused)
	}
	if st.Phase != schema.PhaseActive || st.Server == nil || st.Server.Name == "" {
		return "", refuse("virtualmachine/%s is not running (%s): only a running VM migrates", name, describe(st))
	}
	if spec, _ := vm.Spec(); spec.RunStrategy != "" {
		if err := pendingStop(vm, spec.RunStrategy, "migration"); err != nil {
			return "", err
		}
	}
	pod, err := v.kube.CoreV1().Pods(v.namespace).Get(ctx, st.Server.Name, metav1.GetOptions{})
	if err != nil {
		return "", v.lookupError("the server pod "+st.Server.Name, err)
	}
	source := pod.Spec.NodeName
	if source == "" {
		return "", refuse("virtualmachine/%s: its server %s is on no node yet", name, pod.Name)
	}
	nodes, err := v.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", v.lookupError("the nodes", err)
	}
	if d := st.RootDisk; d != nil && d.ClaimName != "" {
		if why, err := v.pinned(ctx, d.ClaimName, source, nodes.Items); err != nil {
			return "", err
		} else if why != "" {
			return "", refuse("virtualmachine/%s cannot migrate: its disk %s cannot follow it (%s)", name, d.ClaimName, why)
		}
	}
	if target := otherNode(nodes.Items, source, pods.NextServer(pod)); target == "" {
		return "", refuse("virtualmachine/%s cannot migrate: no other Ready, schedulable node than %s that its placement admits (with the tolerations admission gave its server)", name, source)
	}
	return source, nil
}

// refuse is a refusal: one line, exit code 1.
func refuse(format string, args ...any) error { return cli.Exit(fmt.Sprintf(format, args...), 1) }

// lookupError says in one line why something the verb must read cannot be read.
func (v *vmClient) lookupError(what string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return refuse("%s not found in namespace %q", what, v.namespace)
	case apierrors.IsForbidden(err):
		return refuse("cannot read %s: forbidden (%s)", what, apiMessage(err))
	}
	return fmt.Errorf("read %s: %w", what, err)
}

// pinned says why the claim's volume cannot follow the VM off the node source to another of
// nodes (pods.PinnedAmong, as the controller judges it: the volume's node affinity admits no
// other node, whatever the driver's keys), "" when it can.
func (v *vmClient) pinned(ctx context.Context, claim, source string, nodes []corev1.Node) (string, error) {
	pvc, err := v.kube.CoreV1().PersistentVolumeClaims(v.namespace).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", v.lookupError("the disk "+claim, err)
	}
	if pvc.Spec.VolumeName == "" {
		return "", nil // not bound: nothing pins it yet
	}
	pv, err := v.kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", v.lookupError("the volume "+pvc.Spec.VolumeName, err)
	}
	return pods.PinnedAmong(pv, source, nodes), nil
}

// otherNode is a node other than source that is Ready, schedulable, and admits next (the
// server to come): its node selector and required node affinity match the node, and it
// tolerates the node's NoSchedule and NoExecute taints, by the scheduler's own rules
// (component-helpers); "" when there is none. A node that is full is not seen here: the
// controller gives a move up when no node takes the server in time (docs/placement.md).
func otherNode(nodes []corev1.Node, source string, next *corev1.Pod) string {
	affinity := nodeaffinity.GetRequiredNodeAffinity(next)
	for i := range nodes {
		n := &nodes[i]
		if n.Name == source || n.Spec.Unschedulable || !ready(*n) {
			continue
		}
		if ok, err := affinity.Match(n); err != nil || !ok {
			continue
		}
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, next.Spec.Tolerations,
			keepsOff, false); untolerated {
			continue
		}
		return n.Name
	}
	return ""
}

// keepsOff reports whether a taint keeps untolerating pods off its node (PreferNoSchedule
// only discourages them).
func keepsOff(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

func ready(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
