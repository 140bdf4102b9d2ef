package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudnative-czs/vm-controller/backend"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

func diskReport(d *backend.Disk) string {
	if d == nil {
		return "none"
	}
	r := fmt.Sprintf("%s %s %s %s/%s %s %q grow=%v del=%v", d.ID, d.Owner, d.Phase, d.Requested.String(), d.Capacity.String(),
		d.Growth.State, d.Growth.Message, d.CanGrow, d.Deleting)
	if d.KeptMark {
		r += " marked"
	}
	return r
}

func size(s string) backend.DiskSpec { return backend.DiskSpec{Size: resource.MustParse(s)} }

// observed is vm's disk as ObserveDisk shows it: what a decision to update it is made on.
func observed(b *Backend, vm backend.Owner) *backend.Disk {
	d, _ := b.ObserveDisk(vm)
	return d
}

// TestDisks walks one VM's disk through what the decision asks of a backend (create, adopt,
// keep and mark kept, own again and unmark, grow, delete) and what its storage answers, checking what each call returns, what
// ObserveDisk then shows, and that every change notifies.
func TestDisks(t *testing.T) {
	ctx := context.Background()
	vm := backend.Owner{Namespace: "ns", Name: "vm", UID: "u"}
	b := New()
	var notified int
	if _, err := b.Start(ctx, func(types.NamespacedName) { notified++ }); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		do   func() (*backend.Disk, error)
		want string // the disk as ObserveDisk then shows it
		err  string
	}{
		{"created pending", func() (*backend.Disk, error) { return b.CreateDisk(ctx, vm, size("40G")) },
			`disk-1 Owned Pending 40G/0  "" grow=true del=false`, ""},
		{"create again", func() (*backend.Disk, error) { return b.CreateDisk(ctx, vm, size("80G")) },
			`disk-1 Owned Pending 40G/0  "" grow=true del=false`, ""},
		{"bound", func() (*backend.Disk, error) { return nil, b.Bind(vm) },
			`disk-1 Owned Bound 40G/40G  "" grow=true del=false`, ""},
		{"grown at once", func() (*backend.Disk, error) { return b.UpdateDisk(ctx, vm, observed(b, vm), size("50G")) },
			`disk-1 Owned Bound 50G/50G  "" grow=true del=false`, ""},
		{"never shrunk", func() (*backend.Disk, error) { return b.UpdateDisk(ctx, vm, observed(b, vm), size("10G")) },
			`disk-1 Owned Bound 50G/50G  "" grow=true del=false`, ""},
		{"growth refused", func() (*backend.Disk, error) {
			b.AnswerGrowth(backend.Growth{State: backend.GrowthInfeasible, Message: "out of range"})
			return b.UpdateDisk(ctx, vm, observed(b, vm), size("60G"))
		}, `disk-1 Owned Bound 60G/50G Infeasible "out of range" grow=true del=false`, ""},
		{"growth done", func() (*backend.Disk, error) { return nil, b.Grow(vm, backend.Growth{}) },
			`disk-1 Owned Bound 60G/60G  "" grow=true del=false`, ""},
		{"kept", func() (*backend.Disk, error) {
			s := size("60G")
			s.Keep = true
			return b.UpdateDisk(ctx, vm, observed(b, vm), s)
		}, `disk-1 Kept Bound 60G/60G  "" grow=true del=false marked`, ""},
		{"owned again", func() (*backend.Disk, error) { return b.UpdateDisk(ctx, vm, observed(b, vm), size("60G")) },
			`disk-1 Owned Bound 60G/60G  "" grow=true del=false`, ""},
		{"kept again", func() (*backend.Disk, error) {
			s := size("60G")
			s.Keep = true
			return b.UpdateDisk(ctx, vm, observed(b, vm), s)
		}, `disk-1 Kept Bound 60G/60G  "" grow=true del=false marked`, ""},
		{"deleted", func() (*backend.Disk, error) { d, _ := b.ObserveDisk(vm); return nil, b.DeleteDisk(ctx, vm, d) },
			`disk-1 Kept Bound 60G/60G  "" grow=true del=true marked`, ""},
		{"gone", func() (*backend.Disk, error) { b.SetDisk(vm, nil); return nil, nil }, `none`, ""},
		{"another's", func() (*backend.Disk, error) {
			b.SetDisk(vm, &backend.Disk{Name: "vm-rootdisk", ID: "x", Phase: backend.DiskBound, Owner: backend.DiskOther})
			return b.CreateDisk(ctx, vm, size("40G"))
		}, `x Other Bound 0/0  "" grow=false del=false`, "disk vm-rootdisk exists and is not this VM's: delete it (its data with it) or give the VM another name; the controller never takes it over"},
		{"another's not updated", func() (*backend.Disk, error) { return b.UpdateDisk(ctx, vm, observed(b, vm), size("40G")) },
			`x Other Bound 0/0  "" grow=false del=false`, "disk vm-rootdisk is not this VM's: delete it (its data with it) or give the VM another name; the controller never takes it over"},
		{"another's not deleted", func() (*backend.Disk, error) { d, _ := b.ObserveDisk(vm); return nil, b.DeleteDisk(ctx, vm, d) },
			`x Other Bound 0/0  "" grow=false del=false`, ""},
		{"unowned adopted", func() (*backend.Disk, error) {
			b.SetDisk(vm, &backend.Disk{Name: "vm-rootdisk", ID: "y", Phase: backend.DiskBound, Requested: resource.MustParse("40G"),
				Capacity: resource.MustParse("40G"), Owner: backend.DiskUnowned})
			b.AnswerGrowth(backend.Growth{})
			return b.UpdateDisk(ctx, vm, observed(b, vm), size("40G"))
		}, `y Owned Bound 40G/40G  "" grow=false del=false`, ""},
		{"unowned adopted kept", func() (*backend.Disk, error) {
			b.SetDisk(vm, &backend.Disk{Name: "vm-rootdisk", ID: "z", Phase: backend.DiskBound, Requested: resource.MustParse("40G"),
				Capacity: resource.MustParse("40G"), Owner: backend.DiskUnowned})
			s := size("40G")
			s.Keep = true
			return b.UpdateDisk(ctx, vm, observed(b, vm), s)
		}, `z Kept Bound 40G/40G  "" grow=false del=false marked`, ""},
		{"created kept", func() (*backend.Disk, error) {
			b.SetDisk(vm, nil)
			s := size("40G")
			s.Keep = true
			return b.CreateDisk(ctx, vm, s)
		}, `disk-2 Kept Pending 40G/0  "" grow=true del=false marked`, ""},
	}
	for _, s := range steps {
		before := notified
		got, err := s.do()
		switch {
		case s.err == "" && err != nil:
			t.Fatalf("%s: %v", s.name, err)
		case s.err != "" && (err == nil || err.Error() != s.err || !errors.Is(err, backend.ErrDiskConflict) || !errors.Is(err, backend.ErrRejected)):
			t.Fatalf("%s: error %v, want %q, a conflict and a rejection", s.name, err, s.err)
		}
		obs, _ := b.ObserveDisk(vm)
		if r := diskReport(obs); r != s.want {
			t.Errorf("%s: observed %s, want %s", s.name, r, s.want)
		}
		if got != nil && diskReport(got) != diskReport(obs) {
			t.Errorf("%s: returned %s, observed %s", s.name, diskReport(got), diskReport(obs))
		}
		if got != nil && obs != nil && got.Version == "" {
			t.Errorf("%s: a disk without a version", s.name)
		}
		if s.err == "" && !strings.Contains(s.name, "again") && !strings.Contains(s.name, "not") && notified == before {
			t.Errorf("%s: no notification", s.name)
		}
	}
}

// TestDiskVersions: every change gives the disk a new version, and a disk made Bound at once
// has its size.
func TestDiskVersions(t *testing.T) {
	ctx := context.Background()
	vm := backend.Owner{Namespace: "ns", Name: "vm", UID: "u"}
	b := New()
	b.BindDisks(true)
	b.FixedClass("fixed")
	s := size("40G")
	s.StorageClass = "fixed"
	d, err := b.CreateDisk(ctx, vm, s)
	if err != nil {
		t.Fatal(err)
	}
	if d.Phase != backend.DiskBound || d.Capacity.String() != "40G" || d.CanGrow || d.StorageClass != "fixed" {
		t.Fatalf("created %s in %q", diskReport(d), d.StorageClass)
	}
	u, err := b.UpdateDisk(ctx, vm, d, s)
	if err != nil {
		t.Fatal(err)
	}
	if u.Version == d.Version {
		t.Errorf("an update kept version %s", u.Version)
	}
	b.FailDisks(errors.New("storage is down"))
	if _, err := b.CreateDisk(ctx, backend.Owner{Namespace: "ns", Name: "other"}, s); err == nil {
		t.Error("FailDisks did not fail a create")
	}
}

// TestParseDisk reads written-down disks and refuses what a disk cannot be.
func TestParseDisk(t *testing.T) {
	for name, tc := range map[string]struct {
		in, want, err string
	}{
		"bound":     {in: "name: d\nid: i\nphase: Bound\nrequested: 40G\ncapacity: 40G\n", want: `i Owned Bound 40G/40G  "" grow=true del=false`},
		"kept":      {in: "phase: Pending\nrequested: 1Gi\nowner: Kept\ncanGrow: false\npending: waiting\n", want: ` Kept Pending 1Gi/0  "" grow=false del=false`},
		"marked":    {in: "phase: Bound\nrequested: 1G\ncapacity: 1G\nowner: Unowned\nkeptMark: true\n", want: ` Unowned Bound 1G/1G  "" grow=true del=false marked`},
		"growth":    {in: "phase: Bound\nrequested: 2G\ncapacity: 1G\ngrowth: {state: Infeasible, message: no}\n", want: ` Owned Bound 2G/1G Infeasible "no" grow=true del=false`},
		"phase":     {in: "phase: Gone\nrequested: 1G\n", err: `phase "Gone": want one of Pending, Bound, Lost`},
		"owner":     {in: "phase: Bound\nrequested: 1G\nowner: me\n", err: `owner "me": want one of Owned, Kept, Unowned, Other`},
		"growth st": {in: "phase: Bound\nrequested: 1G\ngrowth: {state: Soon}\n", err: `growth.state "Soon": want one of Pending, InProgress, Infeasible`},
		"quantity":  {in: "phase: Bound\nrequested: lots\n", err: `requested "lots"`},
		"key":       {in: "phase: Bound\nsize: 1G\n", err: "field size is not a key of a disk"},
		"empty":     {in: "", err: "the disk is empty"},
		"node affinity key": {in: "phase: Bound\nrequested: 1G\nnodeAffinity: {required: {nodeSelectorTerms: [{matchLabels: {a: b}}]}}\n",
			err: `nodeAffinity: not a volume's node affinity ({required: {nodeSelectorTerms: [...]}}): json: unknown field "matchLabels"`},
		"node affinity not required": {in: "phase: Bound\nrequested: 1G\nnodeAffinity: {nodeSelectorTerms: []}\n", err: "nodeAffinity: not a volume's node affinity"},
		"node affinity empty":        {in: "phase: Bound\nrequested: 1G\nnodeAffinity: {}\n", err: "nodeAffinity: want required"},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := ParseDisk([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := diskReport(d); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestParseDiskNodeAffinity: a disk's node affinity is written as its volume's
// spec.nodeAffinity is, and read as the required node selector (backend.Disk.NodeAffinity).
func TestParseDiskNodeAffinity(t *testing.T) {
	d, err := ParseDisk([]byte(`phase: Bound
requested: 1G
capacity: 1G
nodeAffinity:
  required:
    nodeSelectorTerms:
    - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [a]}]
    - matchFields: [{key: metadata.name, operator: In, values: [node-b]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
		{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
		{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-b"}}}},
	}}
	if !equality.Semantic.DeepEqual(d.NodeAffinity, want) {
		t.Errorf("node affinity %+v, want %+v", d.NodeAffinity, want)
	}
	if d, err := ParseDisk([]byte("phase: Bound\nrequested: 1G\n")); err != nil || d.NodeAffinity != nil {
		t.Errorf("a disk without one: node affinity %+v (%v), want none", d.NodeAffinity, err)
	}
}

// TestDeleteDiskAsSeen: DeleteDisk is conditional on the disk the decision saw, as a claim's
// delete is on its UID and resourceVersion: a disk changed since (marked kept, replaced by
// another of the name) is left as it is and the delete is a Conflict (the VM is decided
// again); a disk as seen is deleted; one gone, or none seen, is no error.
func TestDeleteDiskAsSeen(t *testing.T) {
	ctx := context.Background()
	vm := backend.Owner{Namespace: "ns", Name: "vm", UID: "u"}
	b := New()
	b.BindDisks(true)
	if _, err := b.Start(ctx, func(types.NamespacedName) {}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateDisk(ctx, vm, size("40G")); err != nil {
		t.Fatal(err)
	}
	seen, _ := b.ObserveDisk(vm) // what the decision to delete is made on: owned, not marked
	kept := size("40G")
	kept.Keep = true
	if _, err := b.UpdateDisk(ctx, vm, seen, kept); err != nil { // marked kept since
		t.Fatal(err)
	}
	if err := b.DeleteDisk(ctx, vm, seen); !apierrors.IsConflict(err) {
		t.Errorf("delete of a disk marked kept since it was seen: %v, want a Conflict", err)
	}
	if d, _ := b.ObserveDisk(vm); d == nil || d.Deleting || !d.KeptMark {
		t.Errorf("the disk marked kept since it was seen is now %s", diskReport(d))
	}

	// Another disk of the name, at the version seen: its ID tells it apart.
	now, _ := b.ObserveDisk(vm)
	other := *now
	other.ID = "another"
	b.SetDisk(vm, &other)
	replaced, _ := b.ObserveDisk(vm)
	stale := *now
	stale.Version = replaced.Version
	if err := b.DeleteDisk(ctx, vm, &stale); !apierrors.IsConflict(err) {
		t.Errorf("delete of a disk replaced since it was seen: %v, want a Conflict", err)
	}
	if d, _ := b.ObserveDisk(vm); d == nil || d.Deleting {
		t.Errorf("the disk replaced since it was seen is now %s", diskReport(d))
	}

	if err := b.DeleteDisk(ctx, vm, nil); err != nil {
		t.Errorf("delete with no disk seen: %v", err)
	}
	if err := b.DeleteDisk(ctx, vm, replaced); err != nil {
		t.Errorf("delete of the disk as seen: %v", err)
	}
	if d, _ := b.ObserveDisk(vm); d == nil || !d.Deleting {
		t.Errorf("the disk deleted as seen is now %s", diskReport(d))
	}
	b.SetDisk(vm, nil)
	if err := b.DeleteDisk(ctx, vm, replaced); err != nil {
		t.Errorf("delete of a disk gone: %v", err)
	}
}

// TestUpdateDiskAsSeen: UpdateDisk is conditional on the disk the decision saw, as a claim's
// patch is on its resourceVersion. The decision saw an unowned disk left by an earlier VM of
// the name and adopts it, owned (so that it would go with the VM) and grown; a disk changed
// since (kept for this VM and marked so, taken by another, replaced by another of the name)
// or gone is left as it is and the update is a Conflict (the VM is decided again); a disk as
// seen is adopted.
func TestUpdateDiskAsSeen(t *testing.T) {
	ctx := context.Background()
	vm := backend.Owner{Namespace: "ns", Name: "vm", UID: "u"}
	tests := map[string]func(d *backend.Disk) *backend.Disk{ // the disk since it was seen; nil: unchanged
		"as seen":     nil,
		"marked kept": func(d *backend.Disk) *backend.Disk { d.Owner, d.KeptMark = backend.DiskKept, true; return d },
		"another's":   func(d *backend.Disk) *backend.Disk { d.Owner = backend.DiskOther; return d },
		"replaced":    func(d *backend.Disk) *backend.Disk { d.ID = "another"; return d },
		"gone":        func(*backend.Disk) *backend.Disk { return nil },
	}
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			b := New()
			if _, err := b.Start(ctx, func(types.NamespacedName) {}); err != nil {
				t.Fatal(err)
			}
			b.SetDisk(vm, &backend.Disk{Name: "vm-rootdisk", ID: "d1", Phase: backend.DiskBound, Requested: resource.MustParse("40G"),
				Capacity: resource.MustParse("40G"), CanGrow: true, Owner: backend.DiskUnowned})
			seen := observed(b, vm) // what the decision to adopt it is made on
			if change != nil {
				c := *seen
				b.SetDisk(vm, change(&c))
			}
			before := observed(b, vm)
			got, err := b.UpdateDisk(ctx, vm, seen, size("50G"))
			after := observed(b, vm)
			if change == nil {
				if err != nil || got == nil || got.Owner != backend.DiskOwned || got.KeptMark || got.Requested.String() != "50G" {
					t.Fatalf("update of the disk as seen: %s, %v", diskReport(got), err)
				}
				if diskReport(after) != diskReport(got) {
					t.Errorf("the disk updated as seen is now %s, returned as %s", diskReport(after), diskReport(got))
				}
				return
			}
			if !apierrors.IsConflict(err) || got != nil {
				t.Errorf("update of a disk changed since it was seen: %s, %v; want a Conflict", diskReport(got), err)
			}
			if diskReport(after) != diskReport(before) || after != nil && after.Version != before.Version {
				t.Errorf("the disk changed since it was seen is now %s, was %s", diskReport(after), diskReport(before))
			}
		})
	}
	b := New()
	if _, err := b.UpdateDisk(ctx, vm, nil, size("50G")); err == nil || apierrors.IsConflict(err) {
		t.Errorf("update with no disk seen: %v, want an error", err)
	}
}

// TestDiskOfEarlierVM: a disk is the VM's by its UID, as a claim is to the pods backend (its
// owner reference, its label), not by its name: to a later VM of the name, the disk an
// earlier one owned is another's (its delete and update are refused or leave it alone) and
// the one an earlier one kept is unowned, which the later VM may adopt.
func TestDiskOfEarlierVM(t *testing.T) {
	ctx := context.Background()
	earlier := backend.Owner{Namespace: "ns", Name: "vm", UID: "u1"}
	later := backend.Owner{Namespace: "ns", Name: "vm", UID: "u2"}
	b := New()
	if _, err := b.Start(ctx, func(types.NamespacedName) {}); err != nil {
		t.Fatal(err)
	}
	b.BindDisks(true)
	if _, err := b.CreateDisk(ctx, earlier, size("40G")); err != nil {
		t.Fatal(err)
	}
	if got := diskReport(observed(b, earlier)); got != `disk-1 Owned Bound 40G/40G  "" grow=true del=false` {
		t.Errorf("to its VM: %s", got)
	}
	seen := observed(b, later)
	if seen == nil || seen.Owner != backend.DiskOther {
		t.Fatalf("owned by the earlier VM, to the later: %s, want Other", diskReport(seen))
	}
	if _, err := b.CreateDisk(ctx, later, size("40G")); !errors.Is(err, backend.ErrDiskConflict) {
		t.Errorf("create by the later VM: %v, want ErrDiskConflict", err)
	}
	mine := observed(b, earlier)
	if _, err := b.UpdateDisk(ctx, later, mine, size("50G")); !errors.Is(err, backend.ErrDiskConflict) {
		t.Errorf("update by the later VM on the earlier one's view: %v, want ErrDiskConflict", err)
	}
	if err := b.DeleteDisk(ctx, later, mine); err != nil || observed(b, earlier).Deleting {
		t.Errorf("delete by the later VM: %v, %s, want the disk left alone", err, diskReport(observed(b, earlier)))
	}

	// Kept by the earlier VM: unowned to the later, which adopts it as its own.
	kept := backend.DiskSpec{Size: resource.MustParse("40G"), Keep: true}
	if _, err := b.UpdateDisk(ctx, earlier, observed(b, earlier), kept); err != nil {
		t.Fatal(err)
	}
	if got := observed(b, later); got == nil || got.Owner != backend.DiskUnowned {
		t.Fatalf("kept by the earlier VM, to the later: %s, want Unowned", diskReport(got))
	}
	if _, err := b.UpdateDisk(ctx, later, observed(b, later), size("40G")); err != nil {
		t.Fatalf("adoption by the later VM: %v", err)
	}
	if got := observed(b, later); got.Owner != backend.DiskOwned {
		t.Errorf("adopted: %s, want Owned", diskReport(got))
	}
	if got := observed(b, earlier); got.Owner != backend.DiskOther {
		t.Errorf("to the earlier VM once adopted: %s, want Other", diskReport(got))
	}
}
