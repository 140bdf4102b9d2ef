package main

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cloudnative-czs/vm-controller/bench/record"
)

// TestRecording: a run's record holds the scenario's flags with their values (defaults
// included), its contenders in the order first seen with their repetitions, each contender's
// medians once it has several; finish writes it where --results says, with the charts beside
// it, and reads back the same.
func TestRecording(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.Int("vms", 2000, "")
	resultsDir := resultsFlag(fs)
	args := []string{"--vms", "3", "--results", dir}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	rec := newRecording("compare", fs, args, *resultsDir)
	burst := func(secs float64) *record.Burst {
		return &record.Burst{VMs: 3, Seconds: secs, VMsPerSec: 3 / secs, LatenciesMS: []int64{100, 200, 300}, ActiveMS: []int64{150, 250, 350}}
	}
	rec.add("vm-controller", false, record.Repetition{Rep: 1, Position: 1, Burst: burst(1)})
	rec.add("controller-runtime peer", true, record.Repetition{Rep: 1, Position: 2, Burst: burst(2)})
	rec.add("vm-controller", false, record.Repetition{Rep: 2, Position: 2, Burst: burst(3)})
	rec.figure("teardown: all gone", 4, "s")
	if err := rec.finish(); err != nil {
		t.Fatal(err)
	}
	path := rec.run.Path(dir)
	run, err := record.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []record.Flag{{Name: "results", Value: dir}, {Name: "vms", Value: "3"}}; !slices.Equal(run.Flags, want) {
		t.Errorf("flags %v, want %v", run.Flags, want)
	}
	if !slices.Equal(run.Args, args) || run.Machine.Cores == 0 || run.Finished.Before(run.Started) {
		t.Errorf("args %v, machine %+v, %v to %v", run.Args, run.Machine, run.Started, run.Finished)
	}
	if len(run.Contenders) != 2 || len(run.Contenders[0].Repetitions) != 2 || !run.Contenders[1].Peer {
		t.Fatalf("contenders %+v, want vm-controller with 2 repetitions, then the peer", run.Contenders)
	}
	vmc := run.Contenders[0]
	if peer := run.Contenders[1].Median; vmc.Median == nil || vmc.Median.Burst.Seconds != 2 || peer == nil || peer.Burst.Seconds != 2 || peer.Burst.ActiveMS != nil {
		t.Errorf("medians: vm-controller %+v, peer %+v; want vm-controller's of 1 s and 3 s (2 s), the peer's one repetition without per-VM times",
			vmc.Median, run.Contenders[1].Median)
	}
	if f, ok := vmc.Repetitions[1].Figure("teardown: all gone"); !ok || f.Value != 4 {
		t.Errorf("figure of the last repetition recorded: %+v, %v", f, ok)
	}
	for _, suffix := range []string{"-latency.svg", "-active.svg"} {
		if _, err := os.Stat(path[:len(path)-len(".json")] + suffix); err != nil {
			t.Errorf("chart: %v", err)
		}
	}
}

// TestRecordingOff: with --results empty, nothing is written.
func TestRecordingOff(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.Chdir(wd) }()
	rec := newRecording("leader", flag.NewFlagSet("leader", flag.ContinueOnError), nil, "")
	rec.add("vm-controller", false, record.Repetition{Rep: 1, Started: time.Now(), Figures: []record.Figure{{Name: "x", Value: 1, Unit: "s"}}})
	if err := rec.finish(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("written with --results empty: %v", left)
	}
}

// TestCPUModel reads the first model name of /proc/cpuinfo, and none where there is none.
func TestCPUModel(t *testing.T) {
	info := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n"
	if got := cpuModel(info); got != "AMD EPYC 7B13" {
		t.Errorf("cpuModel = %q", got)
	}
	if got := cpuModel("processor\t: 0\nBogoMIPS\t: 50.00\n"); got != "" {
		t.Errorf("cpuModel without a model name = %q, want empty", got)
	}
}
