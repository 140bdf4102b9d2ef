package pods

import (
	"bytes"
	"io"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// TestPodPlacement: the pod carries the VM's placement as the VM gives it, a migration's node
// to avoid in every term of its required node affinity, and the placement in its annotation,
// from which the server reads it back (through the cache too) whatever admission adds.
func TestPodPlacement(t *testing.T) {
	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "vm", UID: "0b6f1c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f"}
	term := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}
	placement := &backend.Placement{
		NodeSelector: map[string]string{"disktype": "ssd"},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{term, {}}}}},
		Tolerations:               []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "vms", Effect: corev1.TaintEffectNoSchedule}},
		PriorityClassName:         "vm-high",
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.ScheduleAnyway}},
	}
	spec := backend.Spec{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi"), RootDisk: resource.MustParse("1Gi"),
		Image: "img", Placement: placement, AvoidNode: "node-a"}
	before := placement.Canonical()
	pod := newPod(vm, spec)
	if placement.Canonical() != before {
		t.Fatalf("newPod changed the spec's placement: %s", placement.Canonical())
	}
	if pod.Spec.NodeSelector["disktype"] != "ssd" || pod.Spec.PriorityClassName != "vm-high" ||
		!reflect.DeepEqual(pod.Spec.Tolerations, placement.Tolerations) ||
		!reflect.DeepEqual(pod.Spec.TopologySpreadConstraints, placement.TopologySpreadConstraints) {
		t.Errorf("pod spec %+v does not carry the placement", pod.Spec)
	}
	avoid := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"node-a"}}
	terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 2 || !reflect.DeepEqual(terms[0].MatchExpressions, term.MatchExpressions) {
		t.Fatalf("terms %+v: want the VM's two", terms)
	}
	for i, tm := range terms {
		if !reflect.DeepEqual(tm.MatchFields, []corev1.NodeSelectorRequirement{avoid}) {
			t.Errorf("term %d: matchFields %+v, want %+v", i, tm.MatchFields, avoid)
		}
	}
	if got := pod.Annotations[AnnotationPlacement]; got != before {
		t.Errorf("annotation %s, want %s", got, before)
	}

	// Admission adds tolerations of its own, and the scheduler a node: the server reads the
	// placement from the annotation, and its node from the pod.
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists})
	pod.Spec.NodeName = "node-b"
	pod.UID = "7c433542-8907-45fe-887a-7813523dba9e"
	pod.ResourceVersion = "5"
	for name, srv := range map[string]backend.Server{"serverOf": serverOf(pod), "cached": cachePod(pod).server()} {
		if !backend.SamePlacement(srv.Spec.Placement, placement) || srv.Node != "node-b" || srv.Spec.AvoidNode != "" {
			t.Errorf("%s: placement %s on node %q, want %s on node-b", name, srv.Spec.Placement.Canonical(), srv.Node, before)
		}
		want := spec
		if !srv.Spec.Equal(want) {
			t.Errorf("%s: server spec %+v does not equal the spec it was made of", name, srv.Spec)
		}
	}

	// Without a placement: no annotation, no affinity; a damaged annotation reads as none.
	plain := newPod(vm, backend.Spec{CPU: spec.CPU, Memory: spec.Memory, RootDisk: spec.RootDisk, Image: "img"})
	if _, ok := plain.Annotations[AnnotationPlacement]; ok || plain.Spec.Affinity != nil || plain.Spec.Tolerations != nil {
		t.Errorf("a pod without placement has %v, %+v, %+v", plain.Annotations, plain.Spec.Affinity, plain.Spec.Tolerations)
	}
	plain.Annotations[AnnotationPlacement] = "{not json"
	if p := serverOf(plain).Spec.Placement; p != nil {
		t.Errorf("a damaged annotation reads as %s", p.Canonical())
	}
}

// TestAdmittedTolerations: the tolerations a pod has beyond the placement it was made with
// (a namespace's default tolerations, a mutating webhook's) are the server's
// AdmittedTolerations, through the cache too; the placement's own are not, nor those of the
// passing taints that DefaultTolerationSeconds gives every pod, nor any of a pod whose
// tolerations are all its placement's.
func TestAdmittedTolerations(t *testing.T) {
	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "vm", UID: "0b6f1c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f"}
	own := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "vms", Effect: corev1.TaintEffectNoSchedule}
	seconds := int64(300)
	defaults := []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds},
	}
	team := corev1.Toleration{Key: "team", Operator: corev1.TolerationOpEqual, Value: "a", Effect: corev1.TaintEffectNoSchedule}
	gpu := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds}
	// The same key as the placement's, another value: not the placement's.
	other := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}
	spec := backend.Spec{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi"), RootDisk: resource.MustParse("1Gi"), Image: "img"}
	placed := spec
	placed.Placement = &backend.Placement{Tolerations: []corev1.Toleration{own}}
	// The placement's toleration with its operator left out, which a mutating policy may
	// write out as Equal on the pod.
	implicit := placed
	implicit.Placement = &backend.Placement{Tolerations: []corev1.Toleration{{Key: "dedicated", Value: "vms", Effect: corev1.TaintEffectNoSchedule}}}
	five := []corev1.Toleration{team, gpu, other}
	for _, k := range []string{"a", "b"} {
		five = append(five, corev1.Toleration{Key: "extra-" + k, Operator: corev1.TolerationOpExists})
	}
	// The managedFields as the API server writes them (checked on a cluster): the create's
	// entry owns the tolerations when the create set any, admission's added to them; a
	// kubectl patch or edit that changes them takes them over; the status entries never
	// have them.
	entry := func(manager, subresource, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}, Subresource: subresource}
	}
	status := entry("kubelet", "status", `{"f:status":{"f:phase":{},"f:podIP":{}}}`)
	created := entry("vm-controller", "", `{"f:spec":{"f:containers":{"k:{\"name\":\"server\"}":{".":{},"f:image":{}}},"f:nodeSelector":{}}}`)
	createdTolerating := entry("vm-controller", "", `{"f:spec":{"f:containers":{"k:{\"name\":\"server\"}":{".":{},"f:image":{}}},"f:tolerations":{}}}`)
	patched := entry("kubectl-patch", "", `{"f:spec":{"f:tolerations":{}}}`)
	edited := entry("kubectl-edit", "", `{"f:metadata":{"f:labels":{"f:tier":{}}},"f:spec":{"f:tolerations":{}}}`)
	labelled := entry("kubectl-label", "", `{"f:metadata":{"f:labels":{"f:tier":{}}}}`)
	for name, tc := range map[string]struct {
		spec    backend.Spec
		added   []corev1.Toleration
		managed []metav1.ManagedFieldsEntry
		want    []corev1.Toleration
		changed bool // the tolerations were changed after the pod was made
		damaged bool // the placement annotation edited into one that does not read
		exact   bool // kept as read: more than the compact form holds
	}{
		"operator written out":         {spec: implicit, added: []corev1.Toleration{own}, want: nil},
		"a damaged annotation":         {spec: placed, added: []corev1.Toleration{team}, damaged: true},
		"more than the cache's":        {spec: spec, added: five, want: five, exact: true},
		"placement's only":             {spec: placed, added: defaults},
		"no placement, defaults only":  {spec: spec, added: defaults},
		"a namespace's default":        {spec: placed, added: append([]corev1.Toleration{team}, defaults...), want: []corev1.Toleration{team}},
		"without a placement":          {spec: spec, added: []corev1.Toleration{gpu, team}, want: []corev1.Toleration{gpu, team}},
		"the placement's key, a value": {spec: placed, added: []corev1.Toleration{other}, want: []corev1.Toleration{other}},

		// Admission's, at a create that set tolerations (the placement's) or none.
		"admission's, owned by the create": {spec: placed, added: []corev1.Toleration{team}, managed: []metav1.ManagedFieldsEntry{createdTolerating, status},
			want: []corev1.Toleration{team}},
		"admission's, owned by none": {spec: spec, added: []corev1.Toleration{team}, managed: []metav1.ManagedFieldsEntry{created, status, labelled},
			want: []corev1.Toleration{team}},
		// Changed after: admission's cannot be told from a person's, so none counts.
		"changed by kubectl patch": {spec: spec, added: []corev1.Toleration{team, gpu}, managed: []metav1.ManagedFieldsEntry{created, status, patched},
			changed: true},
		"changed by kubectl edit, placed": {spec: placed, added: append([]corev1.Toleration{team}, defaults...), managed: []metav1.ManagedFieldsEntry{created, edited, status},
			changed: true},
		"changed, more than the cache's": {spec: spec, added: five, managed: []metav1.ManagedFieldsEntry{patched}, changed: true},
	} {
		t.Run(name, func(t *testing.T) {
			pod := newPod(vm, tc.spec)
			if tc.spec.Placement == implicit.Placement {
				pod.Spec.Tolerations[0].Operator = corev1.TolerationOpEqual
			}
			if tc.damaged {
				pod.Annotations[AnnotationPlacement] = "{not json"
			}
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, tc.added...)
			pod.UID, pod.ResourceVersion = "7c433542-8907-45fe-887a-7813523dba9e", "5"
			pod.ManagedFields = tc.managed
			// As the informer reads it off a watch, managedFields all but left out.
			d := newPodWatchDecoder(io.NopCloser(bytes.NewReader(watchStream(t, watch.Event{Type: watch.Added, Object: pod}))))
			_, obj, err := d.Decode()
			if err != nil {
				t.Fatal(err)
			}
			if kept := obj.(*corev1.Pod).ManagedFields; tc.changed != (len(kept) > 0) {
				t.Errorf("the watch kept the managedFields %+v; want them only for changed tolerations", kept)
			}
			for name, srv := range map[string]backend.Server{"serverOf": serverOf(pod), "cached": cachePod(pod).server(),
				"watched": cachePod(obj.(*corev1.Pod)).server()} {
				if !reflect.DeepEqual(srv.AdmittedTolerations, tc.want) || srv.TolerationsChanged != tc.changed {
					t.Errorf("%s: admitted %+v, changed %v; want %+v, %v", name, srv.AdmittedTolerations, srv.TolerationsChanged, tc.want, tc.changed)
				}
				if !tc.damaged && !srv.Spec.Equal(tc.spec) {
					t.Errorf("%s: server spec %+v does not equal the spec it was made of", name, srv.Spec)
				}
			}
			if c := cachePod(pod); (c.exact != nil) != tc.exact {
				t.Errorf("kept as read: %+v; want %v", c.exact, tc.exact)
			}
			// kubectl vm migrate matches nodes against the placement's tolerations and these.
			var want []corev1.Toleration
			if p := tc.spec.Placement; p != nil && !tc.damaged {
				want = append(want, p.Tolerations...)
			}
			if want = append(want, tc.want...); !reflect.DeepEqual(NextServer(pod).Spec.Tolerations, want) {
				t.Errorf("the next server tolerates %+v, want %+v", NextServer(pod).Spec.Tolerations, want)
			}
		})
	}
}

// TestPodPreferAvoidNode: the server that follows an eviction under Replace prefers, and only
// prefers, any node but the one it was evicted from: one preferred node affinity term of weight
// 100 with the node's name NotIn [node], beside the VM's own affinity, which the pod keeps as it
// is (its required terms untouched, its preferred terms with their weights), and which the
// spec keeps unchanged. The pod's placement annotation and the server read back from it do not
// carry the preference, so the server equals the spec it was made of.
func TestPodPreferAvoidNode(t *testing.T) {
	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "vm", UID: "0b6f1c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f"}
	prefer := corev1.PreferredSchedulingTerm{Weight: 100, Preference: corev1.NodeSelectorTerm{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"node-a"}}}}}
	zone := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a"}}}}
	ssd := corev1.PreferredSchedulingTerm{Weight: 20, Preference: corev1.NodeSelectorTerm{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disktype", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}}}}
	spread := &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname"}}}
	for name, c := range map[string]struct {
		placement *backend.Placement // the VM's
		avoid     string             // a migration's node to avoid, if any
		// What the pod's node affinity must then be, and its pod anti-affinity.
		required *corev1.NodeSelector
		wantPref []corev1.PreferredSchedulingTerm
		podAnti  *corev1.PodAntiAffinity
	}{
		"no placement": {wantPref: []corev1.PreferredSchedulingTerm{prefer}},
		"placement without affinity": {placement: &backend.Placement{NodeSelector: map[string]string{"disktype": "ssd"}},
			wantPref: []corev1.PreferredSchedulingTerm{prefer}},
		"pod anti-affinity only": {placement: &backend.Placement{Affinity: &corev1.Affinity{PodAntiAffinity: spread}},
			wantPref: []corev1.PreferredSchedulingTerm{prefer}, podAnti: spread},
		"required and preferred node affinity": {
			placement: &backend.Placement{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{zone}},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{ssd}}}},
			required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{zone}},
			wantPref: []corev1.PreferredSchedulingTerm{ssd, prefer}},
		"with a migration's node to avoid": {
			placement: &backend.Placement{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{zone}}}}},
			avoid: "node-b",
			required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: zone.MatchExpressions,
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"node-b"}}}}}},
			wantPref: []corev1.PreferredSchedulingTerm{prefer}},
	} {
		spec := backend.Spec{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi"), RootDisk: resource.MustParse("1Gi"),
			Image: "img", Placement: c.placement, AvoidNode: c.avoid, PreferAvoidNode: "node-a"}
		before := c.placement.Canonical()
		pod := newPod(vm, spec)
		if c.placement.Canonical() != before {
			t.Errorf("%s: newPod changed the spec's placement: %s, was %s", name, c.placement.Canonical(), before)
		}
		if pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil {
			t.Fatalf("%s: the pod has no node affinity: %+v", name, pod.Spec.Affinity)
		}
		na := pod.Spec.Affinity.NodeAffinity
		if !reflect.DeepEqual(na.PreferredDuringSchedulingIgnoredDuringExecution, c.wantPref) {
			t.Errorf("%s: preferred node affinity %+v, want %+v", name, na.PreferredDuringSchedulingIgnoredDuringExecution, c.wantPref)
		}
		if !reflect.DeepEqual(na.RequiredDuringSchedulingIgnoredDuringExecution, c.required) {
			t.Errorf("%s: required node affinity %+v, want %+v", name, na.RequiredDuringSchedulingIgnoredDuringExecution, c.required)
		}
		if !reflect.DeepEqual(pod.Spec.Affinity.PodAntiAffinity, c.podAnti) || pod.Spec.Affinity.PodAffinity != nil {
			t.Errorf("%s: pod (anti-)affinity %+v, want %+v", name, pod.Spec.Affinity, c.podAnti)
		}
		if got := pod.Annotations[AnnotationPlacement]; got != before {
			t.Errorf("%s: placement annotation %q, want %q", name, got, before)
		}
		pod.UID, pod.Spec.NodeName = "7c433542-8907-45fe-887a-7813523dba9e", "node-a"
		for from, srv := range map[string]backend.Server{"serverOf": serverOf(pod), "cached": cachePod(pod).server()} {
			if srv.Spec.PreferAvoidNode != "" || !srv.Spec.Equal(spec) {
				t.Errorf("%s: %s reads the server as %+v, want the spec it was made of without the node to prefer against", name, from, srv.Spec)
			}
		}
		// kubectl vm migrate matches nodes against the VM's own placement, without the preference.
		var own []corev1.PreferredSchedulingTerm
		if next := NextServer(pod); next.Spec.Affinity != nil && next.Spec.Affinity.NodeAffinity != nil {
			own = next.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		}
		if mine := c.wantPref[:len(c.wantPref)-1]; len(own) != len(mine) || len(own) > 0 && !reflect.DeepEqual(own, mine) {
			t.Errorf("%s: the next server of a migration prefers %+v, want the VM's own %+v", name, own, mine)
		}
	}
}

// TestPinnedBy: a local or hostPath volume, or a node affinity that names nodes, pins a disk;
// a zone does not.
func TestPinnedBy(t *testing.T) {
	affinity := func(key string, values ...string) *corev1.VolumeNodeAffinity {
		return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}}}}}}
	}
	tests := map[string]struct {
		spec corev1.PersistentVolumeSpec
		want string
	}{
		"network":  {corev1.PersistentVolumeSpec{}, ""},
		"zonal":    {corev1.PersistentVolumeSpec{NodeAffinity: affinity(corev1.LabelTopologyZone, "a")}, ""},
		"hostname": {corev1.PersistentVolumeSpec{NodeAffinity: affinity(corev1.LabelHostname, "node-a")}, "its volume pv is bound to node-a by its node affinity"},
		"local": {corev1.PersistentVolumeSpec{NodeAffinity: affinity(corev1.LabelHostname, "node-a"),
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/d"}}}, "its volume pv is a local volume on node-a"},
		"hostPath": {corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/d"}}}, ""},
		"hostPath on a node": {corev1.PersistentVolumeSpec{NodeAffinity: affinity(corev1.LabelHostname, "node-a"),
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/d"}}}, "its volume pv is bound to node-a by its node affinity"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pv := &corev1.PersistentVolume{Spec: tc.spec}
			pv.Name = "pv"
			if got := PinnedBy(pv); got != tc.want {
				t.Errorf("pinnedBy = %q, want %q", got, tc.want)
			}
		})
	}
}
