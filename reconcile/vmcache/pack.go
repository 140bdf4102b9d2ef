package vmcache

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	"github.com/klauspost/compress/s2"
	"k8s.io/apimachinery/pkg/api/resource"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// The VM cache keeps each VM's compact JSON compressed with S2 against a dictionary of what
// VMs look like.
//
// Why: the compact JSON was the largest part of what the controller holds per VM, and most of
// it is the same in every VM: the layout's keys, apiVersion, the
// finalizer, phases, reasons, condition types, the messages built around the server's name.
// Against a dictionary of a sample VM only each VM's own names, UIDs and times, and the
// backend's word for its server's state, are left to store (TestPackedSize holds the Active
// VM of the benchmarks to a fraction of its size). Packing and unpacking cost a small part of
// what a reconcile that changes nothing costs (BenchmarkPack, BenchmarkUnpack against
// BenchmarkReconcileNoop); nothing reads the cache without a reason to (the phase gauge reads
// the phase the Object keeps apart).
//
// The dictionary is built once, from samples in this project's built-in layouts, and shared by
// every Object of the process: Same compares packed bytes, which is exact because the encoding
// of equal input against one dictionary is the same. A VM in another layout (a field-map file)
// packs less tightly (the keys it shares with the samples still match), never wrongly.

// vmDictionary returns the dictionary every cached VM is packed against.
var vmDictionary = sync.OnceValue(func() *s2.Dict {
	data, err := dictionaryData()
	if err != nil {
		// Not with the embedded field maps and the decision as it is (TestDictionary renders
		// and decides the samples); were it so, VMs would still pack, against the keys every
		// VM has.
		data = []byte(`{"apiVersion":"","kind":"VirtualMachine","metadata":{"name":"","namespace":"","uid":"",` +
			`"generation":1,"finalizers":["` + schema.Finalizer + `"]},"spec":{},"status":{}}`)
	}
	return s2.MakeDict(data, []byte(`{"apiVersion":"`))
})

// dictionaryData renders the samples the dictionary is made of: in each built-in layout, a
// VM whose server is being created and one that is Active with its usage reported (the two
// states a VM spends its life in). The Active VM goes last: S2 finds the nearest match
// first, and most cached VMs are Active.
func dictionaryData() ([]byte, error) {
	states, err := samples()
	if err != nil {
		return nil, err
	}
	var data []byte
	for _, st := range states {
		for _, v := range schema.BuiltinVersions() {
			gv := k8sschema.GroupVersion{Group: schema.Group, Version: v}
			f, err := schema.ForVersion(gv)
			if err != nil {
				return nil, err
			}
			sample, err := schema.Sample(f, gv.String(), "VirtualMachine", sampleSpec, st.status)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", gv, err)
			}
			data = append(data, sample...)
		}
	}
	return data, nil
}

// The samples' VM: its spec, and the placeholders for its server's and disk's names and
// identities and for every time.
var (
	sampleSpec = schema.SampleSpec{CPU: "100m", Memory: "1Gi", RootDisk: "10Gi"}
	sampleAt   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

const (
	sampleServer = "vm-00000-server"
	sampleClaim  = "vm-00000-rootdisk"
	sampleID     = "00000000-0000-0000-0000-000000000000"
)

// sample is one state of the samples' VM: what the backend shows of it (its server, its disk,
// the usage the poller reads; nil: none yet) and the status the controller writes for that.
type sample struct {
	server *backend.Server
	disk   *backend.Disk
	usage  *backend.Usage
	status schema.Status
}

// samples are the states of the dictionary's VM, Creating then Active, each with the status
// the decision writes for it (decision.DefaultPolicy.Decide, and DecideUsage for the usage),
// so that the phases, reasons, conditions and the messages built around the server's name
// are the decision's own words and follow them when they change, rather than a copy that
// would drift and quietly pack every VM less tightly. It fails when the decision takes the
// world below to another phase or reason than the state it stands for (TestDictionary).
//
// The world is a VM under --root-disk claim (the default) whose status already names its
// server and disk, as after the plan that created them: the disk being bound while the server
// is on its way (a class that binds with its first server), bound once it runs. The server's
// state is the backend's own word (Server.Detail), which reconcile does not know; the samples
// carry the neutral states, as a plan that creates a server does. That is a known cost: the
// pods backend writes pod phases ("Running"), not these words, so each of its VMs packs a few
// bytes larger than against pod phases (BenchmarkCachedVMHeap measures the bytes per VM),
// accepted because reconcile/ holds no backend's states and the dictionary is not to depend
// on one.
func samples() ([]sample, error) {
	size := resource.MustParse(sampleSpec.RootDisk)
	spec := backend.Spec{CPU: resource.MustParse(sampleSpec.CPU), Memory: resource.MustParse(sampleSpec.Memory),
		Image: decision.DefaultPolicy.DefaultImage, Disk: true}
	states := []struct {
		sample
		phase  schema.Phase
		reason string
	}{
		{sample{
			server: &backend.Server{Name: sampleServer, ID: sampleID, State: backend.StatePending, Detail: string(backend.StatePending),
				Spec: spec, Disk: sampleClaim},
			disk: &backend.Disk{Name: sampleClaim, ID: sampleID, Phase: backend.DiskPending, Requested: size,
				BindsWithServer: true, Owner: backend.DiskOwned},
		}, schema.PhaseCreating, decision.ReasonServerCreating},
		{sample{
			server: &backend.Server{Name: sampleServer, ID: sampleID, State: backend.StateReady, Detail: string(backend.StateReady),
				Spec: spec, Disk: sampleClaim, Node: "node-00000", IP: "10.0.0.1"},
			disk: &backend.Disk{Name: sampleClaim, ID: sampleID, Phase: backend.DiskBound, Requested: size, Capacity: size,
				Owner: backend.DiskOwned},
			usage: &backend.Usage{CPU: resource.MustParse("100m"), Memory: resource.MustParse("64Mi")},
		}, schema.PhaseActive, decision.ReasonServerReady},
	}
	gv := k8sschema.GroupVersion{Group: schema.Group, Version: schema.BuiltinVersions()[0]}
	f, err := schema.ForVersion(gv)
	if err != nil {
		return nil, err
	}
	claimed := schema.Status{Server: &schema.ServerStatus{Name: sampleServer, ID: sampleID},
		RootDisk: &schema.RootDiskStatus{ClaimName: sampleClaim}}
	raw, err := schema.Sample(f, gv.String(), "VirtualMachine", sampleSpec, claimed)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gv, err)
	}
	vm, err := schema.Parse(raw, f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gv, err)
	}
	out := make([]sample, 0, len(states))
	for _, st := range states {
		s := st.sample
		plan := decision.DefaultPolicy.Decide(decision.Input{VM: vm, Server: s.server, Disk: s.disk, Now: sampleAt})
		if plan.Status == nil || plan.Status.Phase != st.phase || plan.Status.Reason != st.reason {
			return nil, fmt.Errorf("dictionary sample of a %s server: the decision writes %+v, not phase %s for %s", s.server.State, plan.Status, st.phase, st.reason)
		}
		s.status = *plan.Status
		if s.usage != nil && s.status.Server != nil {
			upd, _ := decision.DefaultUsagePolicy.DecideUsage(s.status, vm.Generation(), *s.usage, nil, time.Time{}, sampleAt)
			s.status.Server.Usage = upd.Usage
			if upd.Conditions != nil {
				s.status.Conditions = upd.Conditions
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// pack compresses a VM's compact JSON into a new slice of its own; scratch is reused.
func pack(scratch *[]byte, raw []byte) []byte {
	*scratch = vmDictionary().Encode((*scratch)[:0], raw)
	return bytes.Clone(*scratch)
}

// unpack returns the compact JSON of packed, in a new slice.
func unpack(packed []byte) ([]byte, error) {
	raw, err := vmDictionary().Decode(nil, packed)
	if err != nil {
		return nil, fmt.Errorf("unpack cached VM: %w", err)
	}
	return raw, nil
}
