package vmcache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/api/resource"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestDictionary: the dictionary holds a sample of every built-in version, so that a VM of
// any of them packs against its own layout.
func TestDictionary(t *testing.T) {
	data, err := dictionaryData()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range schema.BuiltinVersions() {
		if !bytes.Contains(data, []byte(`"apiVersion":"`+schema.Group+"/"+v+`"`)) {
			t.Errorf("no sample of %s/%s in the dictionary", schema.Group, v)
		}
	}
	if len(data) > 65536 {
		t.Errorf("dictionary data is %d bytes; S2 uses the last 64 KiB only", len(data))
	}
}

// TestPackRoundTrip: every golden VM unpacks to the bytes it was packed from, equal JSON packs
// to equal bytes (Same compares packed bytes), and different JSON to different bytes.
func TestPackRoundTrip(t *testing.T) {
	var scratch []byte
	seen := map[string]string{}
	for name, raw := range compactVMs(t) {
		packed := pack(&scratch, raw)
		got, err := unpack(packed)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, raw) {
			t.Errorf("%s: unpacked\n%s\nwant\n%s", name, got, raw)
		}
		if again := pack(&scratch, bytes.Clone(raw)); !bytes.Equal(again, packed) {
			t.Errorf("%s: the same JSON packed to different bytes", name)
		}
		if other, ok := seen[string(packed)]; ok && other != string(raw) {
			t.Errorf("%s: packs to the bytes of another VM", name)
		}
		seen[string(packed)] = string(raw)
	}
	if _, err := unpack([]byte("not packed")); err == nil {
		t.Error("unpack of bytes pack did not make: no error")
	}
}

// TestPackedSize: an Active VM of the benchmarks, with a name, UIDs and times of its own,
// keeps a fraction of its JSON. A dictionary that matched nothing would keep about two thirds.
func TestPackedSize(t *testing.T) {
	o := viaWire(t, distinctVM(7))
	raw := rawOf(t, o)
	if o.Size()*4 > len(raw) {
		t.Errorf("packed to %d bytes of %d; want at most a quarter", o.Size(), len(raw))
	}
	t.Logf("compact JSON %d bytes, packed %d", len(raw), o.Size())
}

// compactVMs are the compact JSON of the golden cases' VMs and of the benchmarks' VM.
func compactVMs(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, raw := range goldenVMs(t) {
		out[name] = rawOf(t, viaWire(t, raw))
	}
	out["active"] = rawOf(t, viaWire(t, activeVM))
	return out
}

// distinctVM is the benchmarks' Active VM (as sent in a watch event, with managedFields) made
// the i-th of a burst: its own name, UIDs and times.
func distinctVM(i int) []byte {
	r := strings.NewReplacer(
		"vm-00042", fmt.Sprintf("vm-%05d", i),
		"0b6f1c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f", fmt.Sprintf("0b6f1c1e-5d5e-4c6a-9d7e-%012x", i),
		"7c433542-8907-45fe-887a-7813523dba9e", fmt.Sprintf("7c433542-8907-45fe-887a-%012x", i*7919),
		"2026-11-21T20:00:03Z", fmt.Sprintf("2026-11-21T20:%02d:%02dZ", i/60%60, i%60),
		`"123456"`, fmt.Sprintf(`"%d"`, 200000+i))
	return []byte(r.Replace(string(wireVM)))
}

// BenchmarkCachedVMHeap is the live heap one cached VM costs: 10,000 distinct VMs decoded from
// the wire into the informer's form and kept, as after a burst (the pods backend has the same
// for a server pod). Reported as B/VM; the allocations of decoding are garbage by then.
func BenchmarkCachedVMHeap(b *testing.B) {
	const n = 10000
	events := make([][]byte, n)
	for i := range events {
		events[i] = distinctVM(i)
	}
	f := decidecase.Fields(b)
	for b.Loop() {
		c := compactor{fields: f}
		kept := make([]*Object, n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i, ev := range events {
			o, err := c.object(gjson.ParseBytes(ev), false)
			if err != nil {
				b.Fatal(err)
			}
			kept[i] = o
		}
		c = compactor{}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/VM")
		runtime.KeepAlive(kept)
	}
}

// BenchmarkPack is what packing costs per stored VM (once per watch event), and BenchmarkUnpack
// what unpacking costs per view (once per reconcile), on the benchmarks' Active VM.
func BenchmarkPack(b *testing.B) {
	raw := rawOf(b, viaWire(b, distinctVM(7)))
	var scratch []byte
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		pack(&scratch, raw)
	}
}

func BenchmarkUnpack(b *testing.B) {
	o := viaWire(b, distinctVM(7))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := o.JSON(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPhaseOf: a phase this project writes is the shared constant; any other is copied out of
// the bytes, which the compactor reuses for the next object.
func TestPhaseOf(t *testing.T) {
	f := decidecase.Fields(t)
	raw := []byte(`{"status":{"phase":"Active"}}`)
	if got := phaseOf(raw, f); got != schema.PhaseActive {
		t.Errorf("phaseOf = %q, want Active", got)
	}
	raw = []byte(`{"status":{"phase":"Hibernating"}}`)
	got := phaseOf(raw, f)
	copy(raw, bytes.Repeat([]byte("x"), len(raw)))
	if got != "Hibernating" {
		t.Errorf("phaseOf = %q after its bytes were reused, want Hibernating", got)
	}
	if got := phaseOf([]byte(`{}`), f); got != "" {
		t.Errorf("phaseOf of a VM without status = %q, want empty", got)
	}
}

// TestReasonOf: the reason is copied out of the bytes, which the compactor reuses for the next
// object; a VM without one reads "".
func TestReasonOf(t *testing.T) {
	f := decidecase.Fields(t)
	raw := []byte(`{"status":{"phase":"Unknown","reason":"NodeLost"}}`)
	got := reasonOf(raw, f)
	copy(raw, bytes.Repeat([]byte("x"), len(raw)))
	if got.Value() != "NodeLost" {
		t.Errorf("reasonOf = %q after its bytes were reused, want NodeLost", got.Value())
	}
	if got := reasonOf([]byte(`{}`), f); got.Value() != "" {
		t.Errorf("reasonOf of a VM without status = %q, want empty", got.Value())
	}
	if (&Object{}).Reason() != "" {
		t.Errorf("an Object made by no compaction (the informer's example) has a reason")
	}
}

// TestDictionarySamples: each VM of the dictionary carries the status the decision writes for
// its state, word for word, so that VMs pack against what the controller writes and not
// against a copy of its wording that drifted: given the server and the disk the state stands
// for, the decision leaves the sample as it is, and an Active sample's UsageReported
// condition is the one DecideUsage writes when usage is first reported.
func TestDictionarySamples(t *testing.T) {
	data, err := dictionaryData()
	if err != nil {
		t.Fatal(err)
	}
	size := resource.MustParse("10Gi")
	spec := backend.Spec{CPU: resource.MustParse("100m"), Memory: resource.MustParse("1Gi"), Image: decision.DefaultPolicy.DefaultImage, Disk: true}
	worlds := map[schema.Phase]struct {
		server *backend.Server
		disk   *backend.Disk
	}{
		schema.PhaseCreating: {
			&backend.Server{Name: "vm-00000-server", ID: "00000000-0000-0000-0000-000000000000", State: backend.StatePending,
				Detail: string(backend.StatePending), Spec: spec, Disk: "vm-00000-rootdisk"},
			&backend.Disk{Name: "vm-00000-rootdisk", ID: "00000000-0000-0000-0000-000000000000", Phase: backend.DiskPending,
				Requested: size, BindsWithServer: true, Owner: backend.DiskOwned},
		},
		schema.PhaseActive: {
			&backend.Server{Name: "vm-00000-server", ID: "00000000-0000-0000-0000-000000000000", State: backend.StateReady,
				Detail: string(backend.StateReady), Spec: spec, Disk: "vm-00000-rootdisk", Node: "node-00000", IP: "10.0.0.1"},
			&backend.Disk{Name: "vm-00000-rootdisk", ID: "00000000-0000-0000-0000-000000000000", Phase: backend.DiskBound,
				Requested: size, Capacity: size, Owner: backend.DiskOwned},
		},
	}
	at := gjson.GetBytes(data, "status.lastUpdateTime").Time()
	seen := map[schema.Phase]int{}
	dec := json.NewDecoder(bytes.NewReader(data))
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		gv, err := k8sschema.ParseGroupVersion(gjson.GetBytes(raw, "apiVersion").String())
		if err != nil {
			t.Fatal(err)
		}
		f, err := schema.ForVersion(gv)
		if err != nil {
			t.Fatal(err)
		}
		vm, err := schema.Parse(raw, f)
		if err != nil {
			t.Fatal(err)
		}
		st := vm.Status()
		w, ok := worlds[st.Phase]
		if !ok {
			t.Errorf("%s: a sample in phase %q", gv, st.Phase)
			continue
		}
		seen[st.Phase]++
		if plan := decision.DefaultPolicy.Decide(decision.Input{VM: vm, Server: w.server, Disk: w.disk, Now: at}); plan.Status != nil {
			t.Errorf("%s, %s: the decision writes another status for the sample's state:\n%s\nwant the sample's\n%s",
				gv, st.Phase, statusJSON(t, f, *plan.Status), statusJSON(t, f, st))
		}
		if st.Phase != schema.PhaseActive {
			continue
		}
		have := st.Condition(decision.ConditionUsageReported)
		first := st
		first.Conditions = slices.DeleteFunc(slices.Clone(st.Conditions), func(c schema.Condition) bool { return c.Type == decision.ConditionUsageReported })
		upd, _ := decision.DefaultUsagePolicy.DecideUsage(first, vm.Generation(), backend.Usage{CPU: resource.MustParse("100m"), Memory: resource.MustParse("64Mi")}, nil, time.Time{}, at)
		want := schema.Status{Conditions: upd.Conditions}.Condition(decision.ConditionUsageReported)
		if have == nil || want == nil || *have != *want {
			t.Errorf("%s: the sample's UsageReported condition is %+v; DecideUsage writes %+v", gv, have, want)
		}
	}
	if n := len(schema.BuiltinVersions()); seen[schema.PhaseCreating] != n || seen[schema.PhaseActive] != n {
		t.Errorf("samples by phase %v; want a Creating and an Active VM in each of the %d built-in layouts", seen, n)
	}
}

// statusJSON is st as the status patch of layout f writes it.
func statusJSON(t *testing.T, f schema.Fields, st schema.Status) []byte {
	t.Helper()
	b, err := schema.StatusPatch(f, st, "")
	if err != nil {
		t.Fatal(err)
	}
	return b
}
