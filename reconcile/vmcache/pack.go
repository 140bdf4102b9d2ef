package vmcache

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	"github.com/klauspost/compress/s2"
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
		// Not with the embedded field maps (TestDictionary renders them all); were it so,
		// VMs would still pack, against the keys every VM has.
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
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	server := "vm-00000-server"
	// status.server.state is the backend's own word (Server.Detail), which reconcile does not
	// know; the samples carry the neutral states, as a plan that creates a server does.
	// That is a known cost: the pods backend writes pod phases ("Running"), not these words,
	// so each of its VMs packs a few bytes larger than against pod phases
	// (BenchmarkCachedVMHeap measures the bytes per VM), accepted
	// because reconcile/ holds no backend's states and the dictionary is not to depend on one.
	// The disk, under --root-disk claim (the default): being bound while the server is on its
	// way, bound once it runs; layouts without its fields leave it out. A server on its way is
	// Reconciling; a running one has a node and an address.
	claim := "vm-00000-rootdisk"
	creating := schema.Status{
		Phase: schema.PhaseCreating, Reason: decision.ReasonServerCreating, Message: decision.PendingMessage,
		Server:             &schema.ServerStatus{Name: server, ID: "00000000-0000-0000-0000-000000000000", State: string(backend.StatePending)},
		RootDisk:           &schema.RootDiskStatus{ClaimName: claim, Phase: string(backend.DiskPending), Request: "10Gi"},
		ObservedGeneration: 1, LastUpdateTime: at,
		Conditions: []schema.Condition{{Type: schema.ConditionReady, Status: schema.ConditionFalse, ObservedGeneration: 1,
			LastTransitionTime: at, Reason: decision.ReasonServerCreating, Message: decision.PendingMessage},
			{Type: schema.ConditionReconciling, Status: schema.ConditionTrue, ObservedGeneration: 1,
				LastTransitionTime: at, Reason: decision.ReasonServerCreating, Message: decision.PendingMessage}},
	}
	active := schema.Status{
		Phase: schema.PhaseActive, Reason: decision.ReasonServerReady, Message: "Server " + server + " is running and ready",
		Server: &schema.ServerStatus{Name: server, ID: "00000000-0000-0000-0000-000000000000", State: string(backend.StateReady),
			Usage: &schema.Usage{CPU: "100m", Memory: "64Mi"}, Node: "node-00000", IP: "10.0.0.1"},
		RootDisk:           &schema.RootDiskStatus{ClaimName: claim, Phase: string(backend.DiskBound), Capacity: "10Gi", Request: "10Gi"},
		ObservedGeneration: 1, LastUpdateTime: at,
		Conditions: []schema.Condition{
			{Type: schema.ConditionReady, Status: schema.ConditionTrue, ObservedGeneration: 1,
				LastTransitionTime: at, Reason: decision.ReasonServerReady, Message: "Server " + server + " is running and ready"},
			{Type: schema.ConditionUsageReported, Status: schema.ConditionTrue, LastTransitionTime: at,
				Reason: decision.ReasonUsageReported, Message: "Usage read from metrics.k8s.io"},
		},
	}
	spec := schema.SampleSpec{CPU: "100m", Memory: "1Gi", RootDisk: "10Gi"}
	var data []byte
	for _, st := range []schema.Status{creating, active} {
		for _, v := range schema.BuiltinVersions() {
			gv := k8sschema.GroupVersion{Group: schema.Group, Version: v}
			f, err := schema.ForVersion(gv)
			if err != nil {
				return nil, err
			}
			sample, err := schema.Sample(f, gv.String(), "VirtualMachine", spec, st)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", gv, err)
			}
			data = append(data, sample...)
		}
	}
	return data, nil
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
