package record

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sample is a run with every kind of field set: two contenders, repetitions with bursts and
// with figures.
func sample() *Run {
	start := time.Date(2026, 11, 24, 21, 2, 3, 0, time.UTC)
	burst := func(perSec float64, lat ...int64) *Burst {
		return &Burst{VMs: len(lat), Seconds: float64(len(lat)) / perSec, VMsPerSec: perSec, P50: 1.5, P99: 2.5, Max: 2.6,
			ControllerCPU: 0.4, APIServerCPU: 3.1, MachineCPU: 5.2, CPUByProcess: map[string]float64{"kube-apiserver": 3.1, "etcd": 0.7},
			PeakRSSMB: 59, WritesPerVM: map[string]float64{"pods POST": 1, "virtualmachines PATCH": 1}, EventsPerVM: 2,
			TeardownSeconds: 4.5, Teardown: &Teardown{VMsGoneSeconds: 3.5, WritesPerVM: map[string]float64{"virtualmachines PATCH": 1.5}, ConflictsPerVM: 0.5, RetriesPerVM: 0.5},
			LatenciesMS: lat, ActiveMS: lat}
	}
	return &Run{
		Version: Version, Scenario: "compare", Started: start, Finished: start.Add(10 * time.Minute),
		Commit: "0219ca1d2d0e4f3b0a0f8f5bd5c2b0e9a1a2b3c4", Dirty: true,
		Machine: Machine{Cores: 2, CPUModel: "AMD EPYC 7B13", MemoryGB: 23.4, GoVersion: "go1.26.0", OS: "linux", Arch: "amd64"},
		Args:    []string{"--vms", "3", "--reps", "2"},
		Flags:   []Flag{{"vms", "3"}, {"reps", "2"}},
		Contenders: []Contender{
			{Name: "vm-controller --events warnings", Repetitions: []Repetition{
				{Rep: 1, Position: 1, Started: start, Burst: burst(2, 800, 900, 1100)},
				{Rep: 2, Position: 2, Started: start.Add(time.Minute), Burst: burst(3, 700, 750, 1000)},
			}},
			{Name: "controller-runtime peer", Peer: true, Repetitions: []Repetition{
				{Rep: 1, Position: 2, Figures: []Figure{{"restart 1: synced", 8.06, "s"}}},
			}},
		},
	}
}

// TestRoundTrip: what Write writes, Read reads back the same, and the file is named by the
// run's start and scenario.
func TestRoundTrip(t *testing.T) {
	run := sample()
	run.Contenders[0].Median = new(Median(run.Contenders[0].Repetitions))
	dir := filepath.Join(t.TempDir(), "results")
	path, err := run.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "2026-11-24T210203Z-compare.json"); path != want {
		t.Errorf("Write wrote %s, want %s", path, want)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, run) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, run)
	}
}

// TestWriteNormalises: times are written in UTC without the monotonic reading, and the
// version is this package's whatever the Run said.
func TestWriteNormalises(t *testing.T) {
	run := sample()
	run.Version = 0
	run.Started = time.Now().In(time.FixedZone("CET", 3600))
	b, err := run.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != Version || !got.Started.Equal(run.Started) || got.Started.Location() != time.UTC {
		t.Errorf("read version %d, start %v; want %d, %v in UTC", got.Version, got.Started, Version, run.Started)
	}
}

// TestReadRefuses: a file of another version, or not a results file, is refused with the
// reason; never read with another layout's meaning.
func TestReadRefuses(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ content, want string }{
		"newer version": {`{"version": 2, "scenario": "compare"}`, "version 2"},
		"no version":    {`{"scenario": "compare"}`, "version 0"},
		"not JSON":      {"| controller | VMs/s |", "invalid character"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Read(path); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Read = %v, want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := Read(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("Read of a missing file: no error")
	}
}

// TestMedian: each figure's median over the repetitions, figure by figure (a median need not
// be any one repetition), an even count averaging the middle two; map entries missing from a
// repetition count as 0; named figures as they come, missing ones left out of their median.
func TestMedian(t *testing.T) {
	b := func(perSec, cpu, api float64, writes map[string]float64) *Burst {
		return &Burst{VMs: 2000, VMsPerSec: perSec, ControllerCPU: cpu, APIServerCPU: api, WritesPerVM: writes, LatenciesMS: []int64{1}}
	}
	odd := Median([]Repetition{
		{Rep: 1, Burst: b(80, 3, 20, map[string]float64{"pods POST": 1, "pods DELETE": 0.5}), Figures: []Figure{{"synced", 8, "s"}}},
		{Rep: 2, Burst: b(90, 2, 24, map[string]float64{"pods POST": 1})},
		{Rep: 3, Burst: b(70, 4, 22, map[string]float64{"pods POST": 1}), Figures: []Figure{{"synced", 10, "s"}, {"writes", 0, "per VM"}}},
	})
	want := &Burst{VMs: 2000, VMsPerSec: 80, ControllerCPU: 3, APIServerCPU: 22, WritesPerVM: map[string]float64{"pods POST": 1, "pods DELETE": 0}}
	if !reflect.DeepEqual(odd.Burst, want) {
		t.Errorf("median burst %+v, want %+v", odd.Burst, want)
	}
	if want := []Figure{{"synced", 9, "s"}, {"writes", 0, "per VM"}}; !reflect.DeepEqual(odd.Figures, want) || odd.Rep != 0 {
		t.Errorf("median figures %v (rep %d), want %v (rep 0)", odd.Figures, odd.Rep, want)
	}
	even := Median([]Repetition{{Burst: b(60, 5, 30, nil)}, {Burst: b(62, 7, 34, nil)}})
	if even.Burst.VMsPerSec != 61 || even.Burst.ControllerCPU != 6 || even.Burst.APIServerCPU != 32 || even.Burst.WritesPerVM != nil {
		t.Errorf("median of two = %+v, want the middle two averaged: 61, 6, 32, no writes", even.Burst)
	}
	if none := Median(nil); none.Burst != nil || none.Figures != nil {
		t.Errorf("median of nothing = %+v, want empty", none)
	}
}

// TestMedianTeardown: the teardown's figures are medians over the repetitions that measured
// them; a file from before they were measured has none, not zeros.
func TestMedianTeardown(t *testing.T) {
	td := func(conflicts, retries, patches float64) *Burst {
		return &Burst{VMs: 600, TeardownSeconds: 30, Teardown: &Teardown{VMsGoneSeconds: 10 * retries, ConflictsPerVM: conflicts, RetriesPerVM: retries,
			WritesPerVM: map[string]float64{"virtualmachines PATCH": patches}}}
	}
	got := Median([]Repetition{{Burst: td(1, 1.2, 2)}, {Burst: &Burst{VMs: 600, TeardownSeconds: 20}}, {Burst: td(0.8, 0.9, 1.8)}, {Burst: td(0.9, 1, 1.9)}})
	want := &Teardown{VMsGoneSeconds: 10, ConflictsPerVM: 0.9, RetriesPerVM: 1, WritesPerVM: map[string]float64{"virtualmachines PATCH": 1.9}}
	if !reflect.DeepEqual(got.Burst.Teardown, want) {
		t.Errorf("median teardown %+v, want %+v (of the three that measured one)", got.Burst.Teardown, want)
	}
	if old := Median([]Repetition{{Burst: &Burst{VMs: 600, TeardownSeconds: 20}}}); old.Burst.Teardown != nil {
		t.Errorf("median teardown of a file without one = %+v, want nil", old.Burst.Teardown)
	}
}

// TestMedianRep: the repetition to draw is the one whose burst took the median time, a real
// run; repetitions without per-VM times are not drawn.
func TestMedianRep(t *testing.T) {
	rep := func(n int, seconds float64, times bool) Repetition {
		r := Repetition{Rep: n, Burst: &Burst{Seconds: seconds}}
		if times {
			r.Burst.ActiveMS = []int64{1}
		}
		return r
	}
	c := Contender{Repetitions: []Repetition{rep(1, 30, true), rep(2, 20, true), rep(3, 25, true), rep(4, 1, false)}}
	if got := c.MedianRep(); got == nil || got.Rep != 3 {
		t.Errorf("MedianRep = %+v, want rep 3 (25 s, between 20 and 30)", got)
	}
	c.Repetitions = c.Repetitions[:2]
	if got := c.MedianRep(); got == nil || got.Rep != 2 {
		t.Errorf("MedianRep of two = %+v, want the faster, rep 2", got)
	}
	if got := (Contender{Repetitions: []Repetition{rep(1, 1, false)}}).MedianRep(); got != nil {
		t.Errorf("MedianRep without per-VM times = %+v, want nil", got)
	}
}

// TestLatencies pools every repetition's VMs, in seconds, sorted.
func TestLatencies(t *testing.T) {
	c := Contender{Repetitions: []Repetition{
		{Burst: &Burst{LatenciesMS: []int64{900, 1500}}}, {Figures: []Figure{{"x", 1, "s"}}}, {Burst: &Burst{LatenciesMS: []int64{1200}}},
	}}
	if got, want := c.Latencies(), []float64{0.9, 1.2, 1.5}; !reflect.DeepEqual(got, want) {
		t.Errorf("Latencies = %v, want %v", got, want)
	}
}
