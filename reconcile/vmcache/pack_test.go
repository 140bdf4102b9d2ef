package vmcache

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
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
