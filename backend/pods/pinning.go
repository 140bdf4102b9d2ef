package pods

import (
	"context"
	"fmt"
	"iter"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/cloudnative-czs/vm-controller/backend"
)

var _ backend.DiskPinning = (*Backend)(nil)

// DiskPinned tells whether vm's disk is bound to some nodes: its claim's PersistentVolume is
// a local volume, or its required node affinity admits no node but the one the VM's server is
// on. Such a disk cannot follow its VM to another node, so a migration is refused. With the
// nodes watched (Config.WatchNodes, which grants listing them), the affinity is matched
// against every other node by the scheduler's own rules (PinnedAmong): a zone's or a region's
// disk follows wherever another node of its zone is, a TopoLVM or OpenEBS volume, whose
// affinity names its node by the driver's own label, does not. Without them, it is judged by
// its keys (PinnedBy). A hostPath volume without a node affinity (the in-tree host-path
// provisioner's, for single-node clusters) is no pin: Kubernetes itself mounts it on any node.
//
// Either way it gives the volume's required node affinity (Pin.NodeAffinity), which the room
// check matches against the nodes it knows with the placement's rules and the cordons
// (backend.Hosts.RoomWithin): whether the other nodes of a zone's disk may take the next
// server (one cordoned does not) is the room check's to say, not this one's, which knows
// nothing of the VM's placement.
//
// It reads the claim and the volume from the API server, not from the backend's caches, which
// keep no volumes: it is asked only when a user asks for a migration, or a running server is
// about to be replaced (or its resize was refused) while the nodes are known. The nodes it
// matches against are the ones it watches (Hosts: their labels), so that it lists none; only
// before their first list is in does it list them (from the API server's watch cache).
func (b *Backend) DiskPinned(ctx context.Context, vm backend.Owner) (backend.Pin, error) {
	name := ClaimName(vm.Name)
	pvc, err := b.cfg.Client.CoreV1().PersistentVolumeClaims(vm.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return backend.Pin{}, nil
	}
	if err != nil {
		return backend.Pin{}, fmt.Errorf("read claim %s/%s: %w", vm.Namespace, name, err)
	}
	if pvc.Spec.VolumeName == "" {
		return backend.Pin{}, nil // no storage yet: it goes where the next server goes
	}
	pv, err := b.cfg.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return backend.Pin{}, nil
	}
	if err != nil {
		return backend.Pin{}, fmt.Errorf("read volume %s of claim %s/%s: %w", pvc.Spec.VolumeName, vm.Namespace, name, err)
	}
	pin := backend.Pin{NodeAffinity: ReachedFrom(pv)}
	source := b.serverNode(vm)
	if !b.cfg.WatchNodes || source == "" || pv.Spec.Local != nil || !required(pv) {
		pin.Why = PinnedBy(pv)
		return pin, nil
	}
	if hosts := b.Hosts(); hosts != nil {
		// The nodes as the node informer keeps them, labels and all (room.go): no list, so
		// that the replacement of a running server (which wants only NodeAffinity) and a
		// migration cost a claim's and a volume's read, not a read of every node.
		pin.Why = pinnedAmong(pv, source, hostNodes(hosts))
		return pin, nil
	}
	// Watched, but not listed yet: the API server's watch cache has them.
	nodes, err := b.cfg.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return backend.Pin{}, fmt.Errorf("list nodes for the node affinity of volume %s: %w", pv.Name, err)
	}
	pin.Why = PinnedAmong(pv, source, nodes.Items)
	return pin, nil
}

// hostNodes yields each of hosts as the node affinity matchers read a node: its name and
// labels, in one node reused for each.
func hostNodes(hosts *backend.Hosts) iter.Seq[*corev1.Node] {
	return func(yield func(*corev1.Node) bool) {
		var node corev1.Node
		for h := range hosts.All() {
			node.Name, node.Labels = h.Name, h.Labels
			if !yield(&node) {
				return
			}
		}
	}
}

// serverNode is the node of vm's server as the pods' cache shows it; "" when it has none.
func (b *Backend) serverNode(vm backend.Owner) string {
	obj, ok, err := b.pods.GetByKey(vm.Namespace + "/" + PodName(vm.Name))
	if err != nil || !ok {
		return ""
	}
	return obj.(*cachedPod).node.String()
}

// ReachedFrom is the nodes pv can be reached from, its required node affinity, which the
// scheduler's VolumeBinding filter holds every pod that mounts it to; nil when none binds it.
// The controller's room check (Pin.NodeAffinity) and the plugin's migrate match the nodes
// against it, so that they count the same nodes.
func ReachedFrom(pv *corev1.PersistentVolume) *corev1.NodeSelector {
	if !required(pv) {
		return nil
	}
	return pv.Spec.NodeAffinity.Required
}

// required reports whether pv has a required node affinity.
func required(pv *corev1.PersistentVolume) bool {
	na := pv.Spec.NodeAffinity
	return na != nil && na.Required != nil
}

// PinnedAmong describes how pv is bound to the node source, or returns "" when it can follow
// a server from there: it is not a local volume, and its required node affinity admits
// another of nodes, matched by the scheduler's own rules (component-helpers), whatever its
// keys are. It is exact where PinnedBy guesses from keys; the nodes must carry their labels.
func PinnedAmong(pv *corev1.PersistentVolume, source string, nodes []corev1.Node) string {
	return pinnedAmong(pv, source, func(yield func(*corev1.Node) bool) {
		for i := range nodes {
			if !yield(&nodes[i]) {
				return
			}
		}
	})
}

// pinnedAmong is PinnedAmong over nodes however they are kept: a list's, or the hosts'
// (hostNodes).
func pinnedAmong(pv *corev1.PersistentVolume, source string, nodes iter.Seq[*corev1.Node]) string {
	if pv.Spec.Local != nil || !required(pv) {
		return PinnedBy(pv)
	}
	admits := nodeaffinity.NewLazyErrorNodeSelector(pv.Spec.NodeAffinity.Required)
	for n := range nodes {
		if n.Name == source {
			continue
		}
		if ok, err := admits.Match(n); err == nil && ok {
			return ""
		}
	}
	return fmt.Sprintf("its volume %s is bound to %s by its node affinity, which admits no other node", pv.Name, source)
}

// PinnedBy describes how pv is bound to some nodes (a local volume, or a required node
// affinity naming nodes), or returns "", judging by the affinity's keys alone: the rule of a
// controller that does not know the nodes, and of the plugin's migrate, so that they refuse
// the same disks.
func PinnedBy(pv *corev1.PersistentVolume) string {
	nodes := pinnedNodes(pv)
	switch {
	case pv.Spec.Local != nil:
		return fmt.Sprintf("its volume %s is a local volume%s", pv.Name, onNodes(nodes))
	case len(nodes) > 0:
		return fmt.Sprintf("its volume %s is bound to %s by its node affinity", pv.Name, strings.Join(nodes, ", "))
	}
	return ""
}

func onNodes(nodes []string) string {
	if len(nodes) == 0 {
		return ""
	}
	return " on " + strings.Join(nodes, ", ")
}

// spanning are the node labels of a zone or a region: a requirement on them alone admits
// every node of the zone, and the scheduler keeps a new server in reach of the volume.
var spanning = map[string]bool{
	corev1.LabelTopologyZone:            true,
	corev1.LabelTopologyRegion:          true,
	corev1.LabelFailureDomainBetaZone:   true,
	corev1.LabelFailureDomainBetaRegion: true,
}

// pinnedNodes lists what pv's required node affinity names nodes by: the values of an In
// requirement on any label but a zone's or a region's (kubernetes.io/hostname, a CSI driver's
// own node label such as topology.topolvm.io/node or openebs.io/nodename), or on metadata.name.
// The terms are alternatives: a term that names no node (a zone only) lets the volume reach
// every node of its zone, and nil is returned.
func pinnedNodes(pv *corev1.PersistentVolume) []string {
	if !required(pv) {
		return nil
	}
	var nodes []string
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		var named []string
		for _, r := range term.MatchExpressions {
			if !spanning[r.Key] && r.Operator == corev1.NodeSelectorOpIn {
				named = append(named, r.Values...)
			}
		}
		for _, r := range term.MatchFields {
			if r.Key == "metadata.name" && r.Operator == corev1.NodeSelectorOpIn {
				named = append(named, r.Values...)
			}
		}
		if len(named) == 0 {
			return nil
		}
		nodes = append(nodes, named...)
	}
	return nodes
}
