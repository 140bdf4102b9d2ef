// Results files: every scenario keeps what it measured in a record.Run and writes it, at its
// end, to --results (the checkout's bench/results by default) as one JSON file, with the
// charts drawn from it beside it. The terminal output stays for following a run; the file is
// what a page quotes.

package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cloudnative-czs/vm-controller/bench/chart"
	"github.com/cloudnative-czs/vm-controller/bench/record"
)

// defaultResults is where results files go unless --results says otherwise: the checkout's
// bench/results, beside the bench, so that a run worth keeping is committed with the page
// that quotes it. It is given relative to the working directory (results, run from bench/).
// Outside a checkout it is results; no scenario gets as far as writing there, as none can
// build the controller.
func defaultResults() string {
	root, err := checkoutRoot()
	if err != nil {
		return "results"
	}
	dir := filepath.Join(root, "bench", "results")
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, dir); err == nil {
			return rel
		}
	}
	return dir
}

// resultsFlag declares --results, which every scenario has.
func resultsFlag(fs *flag.FlagSet) *string {
	return fs.String("results", defaultResults(), "directory for the run's results file (JSON, named by its start and the scenario) "+
		"and its charts (SVG, beside it); empty: write none")
}

// recording is one run's results, filled as the scenario goes and written when it ends.
type recording struct {
	run  record.Run
	dir  string // "": not written
	last int    // the contender whose repetition was recorded last
}

// newRecording starts the record of a run of scenario, whose flags fs has parsed from args;
// dir is --results.
func newRecording(scenario string, fs *flag.FlagSet, args []string, dir string) *recording {
	r := &recording{dir: dir, run: record.Run{Version: record.Version, Scenario: scenario, Started: time.Now(),
		Args: slices.Clone(args), Machine: thisMachine()}}
	if r.run.Args == nil {
		r.run.Args = []string{}
	}
	fs.VisitAll(func(f *flag.Flag) {
		r.run.Flags = append(r.run.Flags, record.Flag{Name: f.Name, Value: f.Value.String()})
	})
	r.run.Commit, r.run.Dirty = checkoutCommit(".")
	return r
}

// add records one repetition of the contender called name, adding the contender the first
// time.
func (r *recording) add(name string, peer bool, rep record.Repetition) {
	for i := range r.run.Contenders {
		if r.run.Contenders[i].Name == name {
			r.run.Contenders[i].Repetitions = append(r.run.Contenders[i].Repetitions, rep)
			r.last = i
			return
		}
	}
	r.run.Contenders = append(r.run.Contenders, record.Contender{Name: name, Peer: peer, Repetitions: []record.Repetition{rep}})
	r.last = len(r.run.Contenders) - 1
}

// lastRep is the repetition recorded last, nil before the first.
func (r *recording) lastRep() *record.Repetition {
	if len(r.run.Contenders) == 0 {
		return nil
	}
	c := &r.run.Contenders[r.last]
	return &c.Repetitions[len(c.Repetitions)-1]
}

// setBurst sets the burst of the repetition recorded last.
func (r *recording) setBurst(b *record.Burst) {
	if rep := r.lastRep(); rep != nil {
		rep.Burst = b
	}
}

// figure adds a named figure to the repetition recorded last.
func (r *recording) figure(name string, value float64, unit string) {
	if rep := r.lastRep(); rep != nil {
		rep.Figures = append(rep.Figures, record.Figure{Name: name, Value: value, Unit: unit})
	}
}

// finish takes each contender's medians (of one repetition too, so that a reader of the file
// finds them in one place whatever the count) and writes the results file and its charts, unless
// --results was empty; it prints where they went.
func (r *recording) finish() error {
	r.run.Finished = time.Now()
	for i := range r.run.Contenders {
		c := &r.run.Contenders[i]
		c.Median = new(record.Median(c.Repetitions))
	}
	if r.dir == "" {
		return nil
	}
	path, err := r.run.Write(r.dir)
	if err != nil {
		return err
	}
	fmt.Printf("\nresults: %s\n", path)
	return drawCharts(&r.run, path)
}

// drawCharts draws the charts of the run in path beside it and prints their paths; a run
// with no burst (leader, usage, ceiling) has none.
func drawCharts(run *record.Run, path string) error {
	files, err := chart.Write(run, path)
	switch {
	case errors.Is(err, record.ErrNoBursts):
		return nil
	case err != nil:
		return err
	}
	for _, f := range files {
		fmt.Printf("chart: %s\n", f)
	}
	return nil
}

// chartCommand re-draws the charts of results files: go -C bench run . chart FILE...
func chartCommand(args []string) error {
	if len(args) == 0 {
		return errors.New("chart: name a results file (go -C bench run . chart results/FILE.json)")
	}
	for _, path := range args {
		run, err := record.Read(path)
		if err != nil {
			return err
		}
		if !run.HasBursts() {
			return fmt.Errorf("chart %s: the %s run has no burst to draw", path, run.Scenario)
		}
		if err := drawCharts(run, path); err != nil {
			return err
		}
	}
	return nil
}

// thisMachine is the machine the run is on, as far as the figures depend on it.
func thisMachine() record.Machine {
	m := record.Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = cpuModel(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if bytes, found, err := kBField(string(b), "MemTotal:"); found && err == nil {
			m.MemoryGB = float64(int(bytes/1e8+0.5)) / 10
		}
	}
	return m
}

// cpuModel is the first "model name" of a /proc/cpuinfo text ("" when it has none, as on
// some ARM kernels).
func cpuModel(cpuinfo string) string {
	for line := range strings.SplitSeq(cpuinfo, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// checkoutCommit is the commit checked out in dir and whether tracked files have changes
// (untracked ones, such as earlier results files, do not count); "" when git cannot tell.
func checkoutCommit(dir string) (commit string, dirty bool) {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", false
	}
	status, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output()
	return strings.TrimSpace(string(out)), err == nil && len(strings.TrimSpace(string(status))) > 0
}
