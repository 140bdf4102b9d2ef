package pods

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// The node labels of the pinning tests: a CSI driver's own node label (TopoLVM's; OpenEBS's
// LVM LocalPV names nodes the same way, by openebs.io/nodename).
const topolvmNode = "topology.topolvm.io/node"

// nodeAffinity is a required node affinity of one term per argument, each of one In
// requirement (key, value).
func nodeAffinity(terms ...[2]string) *corev1.VolumeNodeAffinity {
	sel := &corev1.NodeSelector{}
	for _, kv := range terms {
		sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: kv[0], Operator: corev1.NodeSelectorOpIn, Values: []string{kv[1]}}}})
	}
	return &corev1.VolumeNodeAffinity{Required: sel}
}

// pinNodes are three nodes: node-a and node-b in zone a, node-c alone in zone b, each with
// its TopoLVM label.
func pinNodes() []corev1.Node {
	var nodes []corev1.Node
	for name, zone := range map[string]string{"node-a": "a", "node-b": "a", "node-c": "b"} {
		nodes = append(nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelHostname: name, corev1.LabelTopologyZone: zone, topolvmNode: name}}})
	}
	return nodes
}

// TestPinnedByKeys: without the nodes, a node affinity pins the volume when each of its terms
// requires a label other than a zone's or a region's: kubernetes.io/hostname, or a CSI
// driver's own node label; a zone or a region alone does not, nor does a term of a zone beside
// one of a node.
func TestPinnedByKeys(t *testing.T) {
	tests := map[string]struct {
		affinity *corev1.VolumeNodeAffinity
		want     string
	}{
		"topolvm":        {nodeAffinity([2]string{topolvmNode, "node-a"}), "its volume pv is bound to node-a by its node affinity"},
		"openebs":        {nodeAffinity([2]string{"openebs.io/nodename", "node-a"}), "its volume pv is bound to node-a by its node affinity"},
		"region":         {nodeAffinity([2]string{corev1.LabelTopologyRegion, "r"}), ""},
		"beta zone":      {nodeAffinity([2]string{corev1.LabelFailureDomainBetaZone, "a"}), ""},
		"beta region":    {nodeAffinity([2]string{corev1.LabelFailureDomainBetaRegion, "r"}), ""},
		"zone or a node": {nodeAffinity([2]string{topolvmNode, "node-a"}, [2]string{corev1.LabelTopologyZone, "a"}), ""},
		"two nodes":      {nodeAffinity([2]string{topolvmNode, "node-a"}, [2]string{corev1.LabelHostname, "node-b"}), "its volume pv is bound to node-a, node-b by its node affinity"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{NodeAffinity: tc.affinity}}
			if got := PinnedBy(pv); got != tc.want {
				t.Errorf("PinnedBy = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPinnedAmong: with the nodes known, a volume is pinned when its node affinity admits no
// node but the source, whatever its keys: a TopoLVM volume is; a zone's is not where another
// node shares the zone, and is where the source is alone in it.
func TestPinnedAmong(t *testing.T) {
	tests := map[string]struct {
		affinity *corev1.VolumeNodeAffinity
		local    bool
		source   string
		want     string
	}{
		"topolvm":        {affinity: nodeAffinity([2]string{topolvmNode, "node-a"}), source: "node-a", want: "its volume pv is bound to node-a by its node affinity, which admits no other node"},
		"zone shared":    {affinity: nodeAffinity([2]string{corev1.LabelTopologyZone, "a"}), source: "node-a"},
		"zone alone":     {affinity: nodeAffinity([2]string{corev1.LabelTopologyZone, "b"}), source: "node-c", want: "its volume pv is bound to node-c by its node affinity, which admits no other node"},
		"rack of two":    {affinity: nodeAffinity([2]string{topolvmNode, "node-a"}, [2]string{topolvmNode, "node-b"}), source: "node-a"},
		"no affinity":    {source: "node-a"},
		"local":          {affinity: nodeAffinity([2]string{corev1.LabelHostname, "node-a"}), local: true, source: "node-a", want: "its volume pv is a local volume on node-a"},
		"unknown labels": {affinity: nodeAffinity([2]string{"example.org/pool", "p"}), source: "node-a", want: "its volume pv is bound to node-a by its node affinity, which admits no other node"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{NodeAffinity: tc.affinity}}
			if tc.local {
				pv.Spec.Local = &corev1.LocalVolumeSource{Path: "/d"}
			}
			if got := PinnedAmong(pv, tc.source, pinNodes()); got != tc.want {
				t.Errorf("PinnedAmong = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDiskPinned: the backend judges the VM's volume against the nodes when it watches them
// (its server's node from the pods' cache), and by the affinity's keys otherwise; either way it
// gives the volume's required node affinity, which the room check matches against the nodes
// (backend.Hosts.RoomWithin).
func TestDiskPinned(t *testing.T) {
	pod := runningPod("1", "1Gi") // of resizeOwner
	pod.Spec.NodeName = "node-c"
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: ClaimName(resizeOwner.Name)},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv"}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"},
		Spec: corev1.PersistentVolumeSpec{NodeAffinity: nodeAffinity([2]string{corev1.LabelTopologyZone, "b"})}}
	objs := []runtime.Object{claim, pv}
	for _, n := range pinNodes() {
		objs = append(objs, n.DeepCopy())
	}
	for _, watch := range []bool{true, false} {
		b := New(Config{Client: kubefake.NewClientset(objs...), WatchNodes: watch})
		if err := b.pods.Add(cachePod(pod)); err != nil {
			t.Fatal(err)
		}
		got, err := b.DiskPinned(context.Background(), resizeOwner)
		if err != nil {
			t.Fatal(err)
		}
		// node-c is alone in zone b: with the nodes known, the volume cannot follow; by its
		// keys alone, a zone's volume goes where the scheduler takes the server.
		want := ""
		if watch {
			want = "its volume pv is bound to node-c by its node affinity, which admits no other node"
		}
		if got.Why != want {
			t.Errorf("watching nodes %v: DiskPinned = %q, want %q", watch, got.Why, want)
		}
		if !equality.Semantic.DeepEqual(got.NodeAffinity, pv.Spec.NodeAffinity.Required) {
			t.Errorf("watching nodes %v: node affinity %+v, want the volume's %+v", watch, got.NodeAffinity, pv.Spec.NodeAffinity.Required)
		}
	}
}

// TestDiskPinnedUnbound: a claim without a volume yet, a volume without a node affinity and no
// claim at all bind the disk to no node: no reason, no node affinity.
func TestDiskPinnedUnbound(t *testing.T) {
	name := ClaimName(resizeOwner.Name)
	for what, objs := range map[string][]runtime.Object{
		"no claim":        nil,
		"claim not bound": {&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}},
		"volume without affinity": {
			&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv"}},
			&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}},
		},
	} {
		b := New(Config{Client: kubefake.NewClientset(objs...), WatchNodes: true})
		got, err := b.DiskPinned(context.Background(), resizeOwner)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got.Why != "" || got.NodeAffinity != nil {
			t.Errorf("%s: DiskPinned = %+v, want nothing", what, got)
		}
	}
}

// TestDiskPinnedFromHosts: with the nodes watched and listed (Hosts), the backend matches the
// volume against the hosts it keeps, labels and all, and reads only the claim and the volume:
// no list of the nodes, which every replacement of a running server on a zonal or TopoLVM
// disk paid for a reason it throws away, and which, failing, held it. The clientset holds no
// node, so that a reason computed from a list would say no other node is admitted.
func TestDiskPinnedFromHosts(t *testing.T) {
	for name, tc := range map[string]struct {
		source string // the node of the VM's server
		zone   string // of the volume's node affinity
		want   string
	}{
		"zone shared": {source: "node-a", zone: "a"},
		"zone alone":  {source: "node-c", zone: "b", want: "its volume pv is bound to node-c by its node affinity, which admits no other node"},
	} {
		t.Run(name, func(t *testing.T) {
			pod := runningPod("1", "1Gi") // of resizeOwner
			pod.Spec.NodeName = tc.source
			claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: ClaimName(resizeOwner.Name)},
				Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv"}}
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"},
				Spec: corev1.PersistentVolumeSpec{NodeAffinity: nodeAffinity([2]string{corev1.LabelTopologyZone, tc.zone})}}
			client := kubefake.NewClientset(claim, pv)
			b := New(Config{Client: client, WatchNodes: true})
			for _, n := range pinNodes() {
				b.rooms.set(n.Name, &n)
			}
			b.rooms.synced = func() bool { return true } // as Start's node handler has it once listed
			if err := b.pods.Add(cachePod(pod)); err != nil {
				t.Fatal(err)
			}
			got, err := b.DiskPinned(context.Background(), resizeOwner)
			if err != nil {
				t.Fatal(err)
			}
			if got.Why != tc.want {
				t.Errorf("DiskPinned = %q, want %q", got.Why, tc.want)
			}
			if !equality.Semantic.DeepEqual(got.NodeAffinity, pv.Spec.NodeAffinity.Required) {
				t.Errorf("node affinity %+v, want the volume's %+v", got.NodeAffinity, pv.Spec.NodeAffinity.Required)
			}
			var calls []string
			for _, a := range client.Actions() {
				calls = append(calls, a.GetVerb()+" "+a.GetResource().Resource)
			}
			if want := []string{"get persistentvolumeclaims", "get persistentvolumes"}; !slices.Equal(calls, want) {
				t.Errorf("API calls %q, want %q", calls, want)
			}
		})
	}
}
