package backend

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

// TestHostsRoom: the room for a spec counts the hosts its placement admits, as the scheduler's
// filters tell: the node selector and the required node affinity match a host's labels (and
// name), the tolerations tolerate its NoSchedule and NoExecute taints (a PreferNoSchedule
// taint keeps nothing off), a cordoned host counts only for a spec that tolerates the cordon's
// taint, and the spec's AvoidNode never counts. The largest cpu and memory are each of their
// own host.
func TestHostsRoom(t *testing.T) {
	hosts := NewHosts([]Host{
		{Name: "small", CPU: resource.MustParse("4"), Memory: resource.MustParse("512Gi"), Labels: map[string]string{"size": "small"}},
		{Name: "big", CPU: resource.MustParse("64"), Memory: resource.MustParse("64Gi"), Labels: map[string]string{"size": "big"}},
		{Name: "tainted", CPU: resource.MustParse("96"), Memory: resource.MustParse("8Gi"),
			Taints: []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}},
		{Name: "draining", CPU: resource.MustParse("128"), Memory: resource.MustParse("8Gi"),
			Taints: []corev1.Taint{{Key: "going", Effect: corev1.TaintEffectNoExecute}}},
		{Name: "spot", CPU: resource.MustParse("8"), Memory: resource.MustParse("1Ti"),
			Taints: []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}},
		{Name: "cordoned", CPU: resource.MustParse("256"), Memory: resource.MustParse("8Gi"), Unschedulable: true},
	})
	tolerate := func(key string) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists}
	}
	in := func(key string, values ...string) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}}}}}}}
	}
	for name, tc := range map[string]struct {
		spec Spec
		want string
	}{
		"no placement": {want: "cpu 64, memory 1Ti, 3 of 6 hosts"},
		"node selector": {spec: Spec{Placement: &Placement{NodeSelector: map[string]string{"size": "small"}}},
			want: "cpu 4, memory 512Gi, 1 of 6 hosts"},
		"node affinity": {spec: Spec{Placement: &Placement{Affinity: in("size", "big", "huge")}},
			want: "cpu 64, memory 64Gi, 1 of 6 hosts"},
		"admits none": {spec: Spec{Placement: &Placement{NodeSelector: map[string]string{"size": "huge"}}},
			want: "cpu 0, memory 0, 0 of 6 hosts"},
		"tolerates the taint": {spec: Spec{Placement: &Placement{Tolerations: []corev1.Toleration{
			{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}}}},
			want: "cpu 96, memory 1Ti, 4 of 6 hosts"},
		"tolerates another value": {spec: Spec{Placement: &Placement{Tolerations: []corev1.Toleration{
			{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web", Effect: corev1.TaintEffectNoSchedule}}}},
			want: "cpu 64, memory 1Ti, 3 of 6 hosts"},
		"tolerates NoExecute": {spec: Spec{Placement: &Placement{Tolerations: []corev1.Toleration{tolerate("going")}}},
			want: "cpu 128, memory 1Ti, 4 of 6 hosts"},
		"tolerates the cordon": {spec: Spec{Placement: &Placement{Tolerations: []corev1.Toleration{tolerate(corev1.TaintNodeUnschedulable)}}},
			want: "cpu 256, memory 1Ti, 4 of 6 hosts"},
		"tolerates everything": {spec: Spec{Placement: &Placement{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}},
			want: "cpu 256, memory 1Ti, 6 of 6 hosts"},
		"avoids a node": {spec: Spec{AvoidNode: "big"}, want: "cpu 8, memory 1Ti, 2 of 5 hosts"},
		"by name": {spec: Spec{Placement: &Placement{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}}}}}}}}},
			want: "cpu 8, memory 1Ti, 1 of 6 hosts"},
	} {
		t.Run(name, func(t *testing.T) {
			r := hosts.Room(tc.spec, nil)
			if got := fmt.Sprintf("cpu %s, memory %s, %d of %d hosts", r.CPU.String(), r.Memory.String(), r.Hosts, r.Known); got != tc.want {
				t.Errorf("room %s, want %s", got, tc.want)
			}
		})
	}
}

// TestHostsRoomPassingTaints: a node's passing states (not ready, unreachable, under pressure,
// a cloud provider's node still initializing) do not keep a replacement off it, as a node that
// is not Ready counts: the scheduler places the server once the taint is gone. A taint of
// anyone else's does, and a cloud's shutdown taint. A move counts the passing ones too.
func TestHostsRoomPassingTaints(t *testing.T) {
	taints := func(keys ...string) []corev1.Taint {
		var out []corev1.Taint
		for _, k := range keys {
			out = append(out, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoSchedule})
		}
		return out
	}
	hosts := NewHosts([]Host{
		{Name: "restarting", CPU: resource.MustParse("64"), Memory: resource.MustParse("8Gi"),
			Taints: append(taints(corev1.TaintNodeNotReady, corev1.TaintNodeMemoryPressure, corev1.TaintNodeDiskPressure,
				corev1.TaintNodePIDPressure, corev1.TaintNodeNetworkUnavailable, "node.cloudprovider.kubernetes.io/uninitialized"),
				corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute})},
		{Name: "dedicated", CPU: resource.MustParse("128"), Memory: resource.MustParse("16Gi"), Taints: taints("dedicated")},
		{Name: "stopped", CPU: resource.MustParse("256"), Memory: resource.MustParse("32Gi"), Taints: taints("node.cloudprovider.kubernetes.io/shutdown")},
		{Name: "source", CPU: resource.MustParse("8"), Memory: resource.MustParse("4Gi")},
	})
	line := func(r Room) string {
		return fmt.Sprintf("cpu %s, memory %s, %d of %d hosts", r.CPU.String(), r.Memory.String(), r.Hosts, r.Known)
	}
	if got := line(hosts.Room(Spec{}, nil)); got != "cpu 64, memory 8Gi, 2 of 4 hosts" {
		t.Errorf("room for a replacement %s, want the restarting node's and the source's (cpu 64, memory 8Gi, 2 of 4 hosts)", got)
	}
	// A move counts them out: it ends the server at once, for one that a node that is down
	// would not start.
	if got := line(hosts.Room(Spec{AvoidNode: "source"}, nil)); got != "cpu 0, memory 0, 0 of 3 hosts" {
		t.Errorf("room for a move %s, want none (cpu 0, memory 0, 0 of 3 hosts)", got)
	}
}

// TestHostsRoomAdmitted: the tolerations admission gave the running server count beside the
// placement's, for a replacement and for a move; but a move onto a node in a passing state is
// taken only by the placement's own tolerations, not by an admitted one, even one that
// tolerates every taint.
func TestHostsRoomAdmitted(t *testing.T) {
	hosts := NewHosts([]Host{
		{Name: "dedicated", CPU: resource.MustParse("128"), Memory: resource.MustParse("16Gi"),
			Taints: []corev1.Taint{{Key: "dedicated", Value: "vms", Effect: corev1.TaintEffectNoSchedule}}},
		{Name: "down", CPU: resource.MustParse("256"), Memory: resource.MustParse("32Gi"),
			Taints: []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}},
		{Name: "source", CPU: resource.MustParse("8"), Memory: resource.MustParse("4Gi")},
	})
	line := func(r Room) string {
		return fmt.Sprintf("cpu %s, memory %s, %d of %d hosts", r.CPU.String(), r.Memory.String(), r.Hosts, r.Known)
	}
	dedicated := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "vms", Effect: corev1.TaintEffectNoSchedule}}
	all := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	unreachable := []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	for name, tc := range map[string]struct {
		spec     Spec
		admitted []corev1.Toleration
		want     string
	}{
		"replacement, none":             {want: "cpu 256, memory 32Gi, 2 of 3 hosts"},
		"replacement, admitted":         {admitted: dedicated, want: "cpu 256, memory 32Gi, 3 of 3 hosts"},
		"move, none":                    {spec: Spec{AvoidNode: "source"}, want: "cpu 0, memory 0, 0 of 2 hosts"},
		"move, admitted":                {spec: Spec{AvoidNode: "source"}, admitted: dedicated, want: "cpu 128, memory 16Gi, 1 of 2 hosts"},
		"move, admitted tolerate-all":   {spec: Spec{AvoidNode: "source"}, admitted: all, want: "cpu 128, memory 16Gi, 1 of 2 hosts"},
		"move, admitted unreachable":    {spec: Spec{AvoidNode: "source"}, admitted: unreachable, want: "cpu 0, memory 0, 0 of 2 hosts"},
		"move, placement's unreachable": {spec: Spec{AvoidNode: "source", Placement: &Placement{Tolerations: unreachable}}, want: "cpu 256, memory 32Gi, 1 of 2 hosts"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := line(hosts.Room(tc.spec, tc.admitted)); got != tc.want {
				t.Errorf("room %s, want %s", got, tc.want)
			}
		})
	}
}

// TestHostsRoomWithin: the room for a spec whose server mounts a disk reached from some hosts
// only (its volume's node affinity, Disk.NodeAffinity) counts only the hosts that both the
// disk and the placement admit: a zonal disk whose other node of the zone is cordoned leaves a
// move no host, however much room another zone has; a replacement counts the disk's own host.
// A node affinity of the disk that names a host, by its labels or by metadata.name, admits that
// host only; one that does not parse admits none, as the scheduler's refusal of it would.
// Within counts the hosts the disk admits, the spec's AvoidNode not counted; without a node
// affinity the room is Room's.
func TestHostsRoomWithin(t *testing.T) {
	const zone = corev1.LabelTopologyZone
	hosts := NewHosts([]Host{
		{Name: "a1", CPU: resource.MustParse("8"), Memory: resource.MustParse("16Gi"), Labels: map[string]string{zone: "a"}},
		{Name: "a2", CPU: resource.MustParse("16"), Memory: resource.MustParse("32Gi"), Labels: map[string]string{zone: "a"}, Unschedulable: true},
		{Name: "b1", CPU: resource.MustParse("64"), Memory: resource.MustParse("128Gi"), Labels: map[string]string{zone: "b"}},
	})
	selector := func(r corev1.NodeSelectorRequirement, field bool) *corev1.NodeSelector {
		term := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{r}}
		if field {
			term = corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{r}}
		}
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}
	}
	zoneA := selector(corev1.NodeSelectorRequirement{Key: zone, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}, false)
	named := selector(corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"a1"}}, true)
	broken := selector(corev1.NodeSelectorRequirement{Key: zone, Operator: "Near", Values: []string{"a"}}, false)
	line := func(r Room) string {
		return fmt.Sprintf("cpu %s, memory %s, %d of %d hosts, %d within", r.CPU.String(), r.Memory.String(), r.Hosts, r.Known, r.Within)
	}
	cordon := []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists}}
	for name, tc := range map[string]struct {
		spec   Spec
		within *corev1.NodeSelector
		want   string
	}{
		"move, no disk bound":           {spec: Spec{AvoidNode: "a1"}, want: "cpu 64, memory 128Gi, 1 of 2 hosts, 2 within"},
		"move, zonal disk":              {spec: Spec{AvoidNode: "a1"}, within: zoneA, want: "cpu 0, memory 0, 0 of 2 hosts, 1 within"},
		"move, zonal disk, cordon ok":   {spec: Spec{AvoidNode: "a1", Placement: &Placement{Tolerations: cordon}}, within: zoneA, want: "cpu 16, memory 32Gi, 1 of 2 hosts, 1 within"},
		"move, disk on its node":        {spec: Spec{AvoidNode: "a1"}, within: named, want: "cpu 0, memory 0, 0 of 2 hosts, 0 within"},
		"replacement, zonal disk":       {within: zoneA, want: "cpu 8, memory 16Gi, 1 of 3 hosts, 2 within"},
		"replacement, disk on its node": {within: named, want: "cpu 8, memory 16Gi, 1 of 3 hosts, 1 within"},
		"replacement, placed elsewhere": {spec: Spec{Placement: &Placement{NodeSelector: map[string]string{zone: "b"}}}, within: zoneA,
			want: "cpu 0, memory 0, 0 of 3 hosts, 2 within"},
		"affinity that does not parse": {within: broken, want: "cpu 0, memory 0, 0 of 3 hosts, 0 within"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := line(hosts.RoomWithin(tc.spec, nil, tc.within)); got != tc.want {
				t.Errorf("room %s, want %s", got, tc.want)
			}
			if tc.within == nil {
				if got, room := line(hosts.RoomWithin(tc.spec, nil, nil)), line(hosts.Room(tc.spec, nil)); got != room {
					t.Errorf("room without a disk's affinity %s, Room's %s", got, room)
				}
			}
		})
	}
}
