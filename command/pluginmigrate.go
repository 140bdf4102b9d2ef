// The migrate verb's client side: checks that a move can happen, then writes the request
// (the annotation cloudnative.czs/migrateRequestedAt) that the controller carries out (a
// cold migration: the server is deleted and a new one made on another node, with the same
// disk). A move that cannot happen is refused here, with one line, and nothing is written.

package command

import (
	"context"
	"fmt"
	"slices"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/cloudnative-czs/vm-controller/backend/pods"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

func migrateVMCommand(c *pluginConfig, version string) *cli.Command {
	return &cli.Command{
		Name:      "migrate",
		Usage:     "move a running VM to another node (a cold migration: a new server, the same disk)",
		ArgsUsage: "NAME",
		Description: "Checks that the VM runs (phase Active, its server on a node), that its disk can follow (its volume is not pinned to " +
			"nodes; an ephemeral disk always follows) and that another Ready node exists that both its disk can be reached from (its volume's node affinity) " +
			"and the VM's placement admits (with the tolerations admission gave its server pod); then writes the annotation " +
			schema.AnnotationMigrateRequestedAt + " with the time, which the controller acts on once. Otherwise it refuses and changes nothing, as it does for a VM being deleted, " +
			"whose requests the controller no longer carries out.",
		Flags: c.flags(),
		Action: action(c, oneName, func(cc *cli.Context) error {
			v, name, err := c.connect(cc, version)
			if err != nil {
				return err
			}
			return v.migrate(cc.Context, name, c.known())
		}),
	}
}

// migrate checks and writes the migration request of the VM name; a VM that changed meanwhile
// is read and checked again (vmClient.write). known are the flags the plugin was run with,
// which a command it gives repeats (verbs).
func (v *vmClient) migrate(ctx context.Context, name string, known *decision.PluginFlags) error {
	var source, at string
	err := v.write(ctx, name, func(vm schema.VirtualMachine) (map[string]any, error) {
		if err := migrateRequest.unrecorded(vm.Name(), v.fields); err != nil {
			return nil, err
		}
		var err error
		if source, err = v.migrationSource(ctx, vm, known); err != nil {
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

// migrationSource checks that vm can migrate and returns the node its server is on: not one
// being deleted, whose requests the controller no longer acts on (beingDeleted).
func (v *vmClient) migrationSource(ctx context.Context, vm schema.VirtualMachine, known *decision.PluginFlags) (string, error) {
	name, st := vm.Name(), vm.Status()
	if err := beingDeleted(vm); err != nil {
		return "", err
	}
	if vm.Paused() {
		// Its status says nothing of now, and a move checked against today's nodes would be
		// carried out whenever it is resumed. The way to resume it names the VM as the
		// controller's Paused condition does, by its group (the one the plugin read it at) and
		// namespace: `vm` is no short name of another group's resource, and KubeVirt's CRD
		// has it as well as this project's; and with the --context and --kubeconfig the plugin
		// was run with, which reach the cluster it read the VM in.
		return "", refuse("virtualmachine/%s is paused (%s): the controller leaves it alone; resume it first: %s",
			name, schema.AnnotationPaused, known.Kubectl(decision.Annotate(vm, schema.AnnotationPaused+"-")))
	}
	if st.Phase != schema.PhaseActive || st.Server == nil || st.Server.Name == "" {
		return "", refuse("virtualmachine/%s is not running (%s): only a running VM migrates", name, describe(st))
	}
	if spec, _ := vm.Spec(); spec.RunStrategy != "" {
		if err := pendingStop(vm, spec.RunStrategy, "migration", known); err != nil {
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
	var disk string
	var reach *corev1.NodeSelector // the nodes the disk can be reached from; nil: any
	if d := st.RootDisk; d != nil && d.ClaimName != "" {
		pv, err := v.volume(ctx, d.ClaimName)
		if err != nil {
			return "", err
		}
		if pv != nil {
			if why := pods.PinnedAmong(pv, source, nodes.Items); why != "" {
				return "", refuse("virtualmachine/%s cannot migrate: its disk %s cannot follow it (%s)", name, d.ClaimName, why)
			}
			disk, reach = d.ClaimName, pods.ReachedFrom(pv)
		}
	}
	switch target, outOfReach := otherNode(nodes.Items, source, pods.NextServer(pod), reach); {
	case target == "" && outOfReach:
		// The controller's room check would refuse the request so (MigrationRefused): the
		// nodes the disk follows to are not those that take the next server.
		return "", refuse("virtualmachine/%s cannot migrate: no other Ready node than %s that its disk %s can be reached from "+
			"(its volume's node affinity) and that its placement admits (with the tolerations admission gave its server)", name, source, disk)
	case target == "":
		return "", refuse("virtualmachine/%s cannot migrate: no other Ready node than %s that its placement admits (with the tolerations admission gave its server)", name, source)
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

// volume is the PersistentVolume the claim is bound to, which the migration's checks read
// (whether it can follow the VM, and where to); nil when it is not bound yet, and nothing
// pins it.
func (v *vmClient) volume(ctx context.Context, claim string) (*corev1.PersistentVolume, error) {
	pvc, err := v.kube.CoreV1().PersistentVolumeClaims(v.namespace).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return nil, v.lookupError("the disk "+claim, err)
	}
	if pvc.Spec.VolumeName == "" {
		return nil, nil
	}
	pv, err := v.kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return nil, v.lookupError("the volume "+pvc.Spec.VolumeName, err)
	}
	return pv, nil
}

// otherNode is a node other than source that the disk can be reached from (reach, the
// required node affinity of its volume; nil: any node), that is Ready, and
// admits next (the server to come): its node selector and required node affinity match the
// node, and it tolerates the node's NoSchedule and NoExecute taints (its cordon as one), by the scheduler's own
// rules (component-helpers); "" when there is none. Both must hold of one node, as the
// controller's room check counts it (backend.Hosts.RoomWithin): a zonal disk whose other nodes
// in the zone are cordoned has nowhere to go, whatever another zone has. outOfReach reports
// whether reach ruled out some node other than source, when the refusal names the disk, as the
// controller's does. A node that is full is not seen here: the controller gives a move up when
// no node takes the server in time (docs/placement.md).
func otherNode(nodes []corev1.Node, source string, next *corev1.Pod, reach *corev1.NodeSelector) (target string, outOfReach bool) {
	affinity := nodeaffinity.GetRequiredNodeAffinity(next)
	var disk *nodeaffinity.LazyErrorNodeSelector
	if reach != nil {
		disk = nodeaffinity.NewLazyErrorNodeSelector(reach)
	}
	for i := range nodes {
		n := &nodes[i]
		if n.Name == source {
			continue
		}
		if disk != nil {
			if ok, err := disk.Match(n); err != nil || !ok {
				outOfReach = true
				continue
			}
		}
		if !ready(*n) {
			continue
		}
		if ok, err := affinity.Match(n); err != nil || !ok {
			continue
		}
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), withCordon(n), next.Spec.Tolerations,
			keepsOff, false); untolerated {
			continue
		}
		return n.Name, outOfReach
	}
	return "", outOfReach
}

// withCordon is n's taints, with its cordon (spec.unschedulable) as the taint the node
// lifecycle controller gives it (node.kubernetes.io/unschedulable:NoSchedule), should it not
// be there yet: the scheduler reads the cordon so, and so does the controller's room check
// (backend.Hosts), so that a VM whose placement tolerates the cordon may move onto a cordoned
// node, and one whose placement does not, may not.
func withCordon(n *corev1.Node) []corev1.Taint {
	if !n.Spec.Unschedulable || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == corev1.TaintNodeUnschedulable && t.Effect == corev1.TaintEffectNoSchedule
	}) {
		return n.Spec.Taints
	}
	return append(slices.Clip(n.Spec.Taints), corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
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
