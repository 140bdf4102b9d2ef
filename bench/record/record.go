// Package record is the bench's results file: what one run of `go -C bench run . SCENARIO`
// measured, as JSON, one file per run. The bench prints its figures too, but a terminal's
// scrollback is not a source: the page's tables (`go -C bench run . report FILE`) and the charts
// (`go -C bench run . chart FILE`) are drawn from these files, and a figure quoted anywhere can
// be traced to the file, the commit and the machine that made it.
//
// A file holds the run's contenders (vm-controller, the controller-runtime peer, a baseline
// build), each with its repetitions in the order they ran and the median of each figure. A
// repetition that brought VMs to Active has a Burst, with the per-VM times the charts need;
// every other figure (a cold start, the memory per VM, a leader handoff) is a named Figure
// with its unit.
package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Version is the version of the file format this package writes. Read refuses another, so
// that a file is never read with the meaning of a different layout: a change that renames a
// field or changes its unit takes a new version.
const Version = 1

// Run is one run of a bench scenario.
type Run struct {
	Version  int       `json:"version"`
	Scenario string    `json:"scenario"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Commit is the checkout's commit (the full hash), and Dirty whether the checkout had
	// uncommitted changes: the figures are of that code only when it had none.
	Commit  string  `json:"commit"`
	Dirty   bool    `json:"dirty,omitempty"`
	Machine Machine `json:"machine"`
	// Args are the scenario's arguments as given, and Flags every flag of the scenario with
	// the value it had, defaults included.
	Args       []string    `json:"args"`
	Flags      []Flag      `json:"flags"`
	Contenders []Contender `json:"contenders"`
}

// Machine is what the run's figures depend on most: the cores that the cluster, the
// controller and the bench all share.
type Machine struct {
	Cores     int     `json:"cores"`
	CPUModel  string  `json:"cpu_model"`
	MemoryGB  float64 `json:"memory_gb"`
	GoVersion string  `json:"go_version"`
	OS        string  `json:"os"`
	Arch      string  `json:"arch"`
}

// Flag is one flag of the scenario and its value.
type Flag struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Contender is one controller of the run with its repetitions, in the order they ran.
type Contender struct {
	Name string `json:"name"`
	// Peer marks the controller-runtime peer, the one the others are compared with.
	Peer        bool         `json:"peer,omitempty"`
	Repetitions []Repetition `json:"repetitions"`
	// Median is each figure's median over the repetitions, figure by figure (so it need
	// not be any one repetition), without the per-VM times; with one repetition, its
	// figures.
	Median *Repetition `json:"median,omitempty"`
}

// Repetition is one repetition of a contender.
type Repetition struct {
	// Rep counts from 1; 0 is a median.
	Rep int `json:"rep"`
	// Position is the contender's place in its repetition (from 1): compare rotates the
	// order, so that no contender always runs first.
	Position int       `json:"position,omitempty"`
	Started  time.Time `json:"started,omitzero"`
	Burst    *Burst    `json:"burst,omitempty"`
	Figures  []Figure  `json:"figures,omitempty"`
}

// Burst is N VMs created at once and brought to Active. Times are from the start of the first
// create; CPU is user and system time from /proc over the same span, first create to the
// last VM seen Active.
type Burst struct {
	VMs       int     `json:"vms"`
	Seconds   float64 `json:"seconds"`
	VMsPerSec float64 `json:"vms_per_s"`
	// P50, P99 and Max are create->Active per VM: from the start of its create call to the
	// bench's watch seeing it Active.
	P50 float64 `json:"p50_s"`
	P99 float64 `json:"p99_s"`
	Max float64 `json:"max_s"`
	// ControllerCPU is the controller process's; APIServerCPU kube-apiserver's; MachineCPU
	// every process's on the machine (the cluster's, the bench's own and the controller's).
	ControllerCPU float64 `json:"controller_cpu_s"`
	APIServerCPU  float64 `json:"apiserver_cpu_s"`
	MachineCPU    float64 `json:"machine_cpu_s"`
	// CPUByProcess is MachineCPU by command name (kernel workers summed as kworker).
	CPUByProcess map[string]float64 `json:"cpu_by_process_s,omitempty"`
	// PeakRSSMB is the controller's VmHWM at all Active; 0 where not measured.
	PeakRSSMB float64 `json:"peak_rss_mb,omitempty"`
	// WritesPerVM are the API server's writes of the controller's kinds, per VM, by
	// "resource verb" (virtualmachines PATCH, virtualmachines/status PATCH, pods POST, ...),
	// answered 409 included; ConflictsPerVM those answered 409 Conflict.
	WritesPerVM    map[string]float64 `json:"writes_per_vm,omitempty"`
	ConflictsPerVM float64            `json:"conflicts_per_vm"`
	// EventsPerVM are the Events in the namespace that the scheduler did not record.
	EventsPerVM float64 `json:"events_per_vm"`
	// TeardownSeconds is from the namespace's delete, the controller running, until it is
	// gone; 0 where not measured.
	TeardownSeconds float64 `json:"teardown_s,omitempty"`
	// Teardown is what the controller did over that span; nil where not measured.
	Teardown *Teardown `json:"teardown,omitempty"`
	// LatenciesMS are the create->Active times of the VMs, in milliseconds, sorted.
	LatenciesMS []int64 `json:"latencies_ms,omitempty"`
	// ActiveMS are when each VM was first seen Active, in milliseconds from the first
	// create, sorted: VMs Active over time is its step function (i+1 VMs at ActiveMS[i]).
	ActiveMS []int64 `json:"active_ms,omitempty"`
}

// Teardown is what the controller did while the namespace of its VMs was deleted, from the
// namespace's delete until it was gone, per VM.
type Teardown struct {
	// VMsGoneSeconds is from the namespace's delete until the bench's watch saw the last VM
	// go: the part of the teardown the controller takes part in. The rest, until the
	// namespace is gone, is the namespace controller's own backoff between its checks.
	VMsGoneSeconds float64 `json:"vms_gone_s"`
	// WritesPerVM are the API server's writes of VMs, by "resource verb" (virtualmachines
	// PATCH, virtualmachines/status PATCH, ...), answered 409 included: on their way out
	// only the controller writes them (the namespace controller deletes them).
	WritesPerVM map[string]float64 `json:"writes_per_vm,omitempty"`
	// ConflictsPerVM are those answered 409 Conflict: writes decided on a stale VM.
	ConflictsPerVM float64 `json:"conflicts_per_vm"`
	// RetriesPerVM are the reconciles the controller's work queues put back to be tried
	// again after a backoff (workqueue_retries_total), a conflict or another error each.
	RetriesPerVM float64 `json:"retries_per_vm"`
}

// Figure is one named figure of a repetition, such as a cold start's time to synced.
type Figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

// Path is the file a run is written to in dir: its start, to the second in UTC, and its
// scenario, so that a directory lists the runs in order.
func (r *Run) Path(dir string) string {
	return filepath.Join(dir, r.Started.UTC().Format("2006-01-02T150405Z")+"-"+r.Scenario+".json")
}

// Write writes r to r.Path(dir), creating dir, and returns the path.
func (r *Run) Write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create the results directory: %w", err)
	}
	path := r.Path(dir)
	b, err := r.Marshal()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", fmt.Errorf("write results: %w", err)
	}
	return path, nil
}

// Marshal is r as the file holds it: indented JSON, times in UTC, ending in a newline.
func (r *Run) Marshal() ([]byte, error) {
	c := *r
	c.Version = Version
	c.Started, c.Finished = c.Started.Round(0).UTC(), c.Finished.Round(0).UTC()
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode results: %w", err)
	}
	return append(b, '\n'), nil
}

// Read reads the results file at path.
func Read(path string) (*Run, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read results %s: %w", path, err)
	}
	if r.Version != Version {
		return nil, fmt.Errorf("read results %s: version %d, this bench reads version %d", path, r.Version, Version)
	}
	return &r, nil
}

// ErrNoBursts says that a run has no burst to draw or tabulate (a leader or usage run).
var ErrNoBursts = errors.New("the run has no burst")

// Median is each figure's median over reps, figure by figure; an even count averages the
// middle two. The per-VM times are left out: a median of distributions is not one.
func Median(reps []Repetition) Repetition {
	m := Repetition{}
	var bursts []*Burst
	for i := range reps {
		if reps[i].Burst != nil {
			bursts = append(bursts, reps[i].Burst)
		}
	}
	if len(bursts) > 0 {
		med := func(f func(*Burst) float64) float64 {
			v := make([]float64, len(bursts))
			for i, b := range bursts {
				v[i] = f(b)
			}
			return median(v)
		}
		b := &Burst{VMs: bursts[0].VMs}
		b.Seconds = med(func(b *Burst) float64 { return b.Seconds })
		b.VMsPerSec = med(func(b *Burst) float64 { return b.VMsPerSec })
		b.P50 = med(func(b *Burst) float64 { return b.P50 })
		b.P99 = med(func(b *Burst) float64 { return b.P99 })
		b.Max = med(func(b *Burst) float64 { return b.Max })
		b.ControllerCPU = med(func(b *Burst) float64 { return b.ControllerCPU })
		b.APIServerCPU = med(func(b *Burst) float64 { return b.APIServerCPU })
		b.MachineCPU = med(func(b *Burst) float64 { return b.MachineCPU })
		b.PeakRSSMB = med(func(b *Burst) float64 { return b.PeakRSSMB })
		b.ConflictsPerVM = med(func(b *Burst) float64 { return b.ConflictsPerVM })
		b.EventsPerVM = med(func(b *Burst) float64 { return b.EventsPerVM })
		b.TeardownSeconds = med(func(b *Burst) float64 { return b.TeardownSeconds })
		b.CPUByProcess = medianOfMaps(bursts, func(b *Burst) map[string]float64 { return b.CPUByProcess })
		b.WritesPerVM = medianOfMaps(bursts, func(b *Burst) map[string]float64 { return b.WritesPerVM })
		b.Teardown = medianTeardown(bursts)
		m.Burst = b
	}
	// Figures in the order they first appear; a repetition without one counts as missing,
	// not as 0.
	var names []string
	byName := map[string][]float64{}
	units := map[string]string{}
	for _, r := range reps {
		for _, f := range r.Figures {
			if _, ok := byName[f.Name]; !ok {
				names = append(names, f.Name)
				units[f.Name] = f.Unit
			}
			byName[f.Name] = append(byName[f.Name], f.Value)
		}
	}
	for _, n := range names {
		m.Figures = append(m.Figures, Figure{Name: n, Value: median(byName[n]), Unit: units[n]})
	}
	return m
}

// medianTeardown is each teardown figure's median over the bursts that measured one; nil when
// none did.
func medianTeardown(bursts []*Burst) *Teardown {
	var measured []*Burst
	for _, b := range bursts {
		if b.Teardown != nil {
			measured = append(measured, b)
		}
	}
	if len(measured) == 0 {
		return nil
	}
	med := func(f func(*Teardown) float64) float64 {
		v := make([]float64, len(measured))
		for i, b := range measured {
			v[i] = f(b.Teardown)
		}
		return median(v)
	}
	return &Teardown{
		VMsGoneSeconds: med(func(t *Teardown) float64 { return t.VMsGoneSeconds }),
		WritesPerVM:    medianOfMaps(measured, func(b *Burst) map[string]float64 { return b.Teardown.WritesPerVM }),
		ConflictsPerVM: med(func(t *Teardown) float64 { return t.ConflictsPerVM }),
		RetriesPerVM:   med(func(t *Teardown) float64 { return t.RetriesPerVM }),
	}
}

// medianOfMaps is the median of each key over the maps; a map without the key counts as 0
// (no writes of that kind, no CPU of that process).
func medianOfMaps(bursts []*Burst, f func(*Burst) map[string]float64) map[string]float64 {
	keys := map[string]bool{}
	for _, b := range bursts {
		for k := range f(b) {
			keys[k] = true
		}
	}
	if len(keys) == 0 {
		return nil
	}
	out := map[string]float64{}
	for k := range keys {
		v := make([]float64, len(bursts))
		for i, b := range bursts {
			v[i] = f(b)[k]
		}
		out[k] = median(v)
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Figure returns the figure called name, and whether r has it.
func (r Repetition) Figure(name string) (Figure, bool) {
	for _, f := range r.Figures {
		if f.Name == name {
			return f, true
		}
	}
	return Figure{}, false
}

// MedianRep is the repetition whose burst took the median time (the earlier of the middle two
// for an even count): a real run to draw, where a median of each figure is none. It is nil
// when no repetition has a burst with per-VM times.
func (c Contender) MedianRep() *Repetition {
	var withTimes []*Repetition
	for i := range c.Repetitions {
		if b := c.Repetitions[i].Burst; b != nil && len(b.ActiveMS) > 0 {
			withTimes = append(withTimes, &c.Repetitions[i])
		}
	}
	if len(withTimes) == 0 {
		return nil
	}
	sorted := slices.Clone(withTimes)
	slices.SortStableFunc(sorted, func(a, b *Repetition) int {
		switch {
		case a.Burst.Seconds < b.Burst.Seconds:
			return -1
		case a.Burst.Seconds > b.Burst.Seconds:
			return 1
		}
		return 0
	})
	return sorted[(len(sorted)-1)/2]
}

// Latencies are the create->Active times of every VM of every repetition of c, in seconds,
// sorted: the distribution the charts draw.
func (c Contender) Latencies() []float64 {
	var out []float64
	for _, r := range c.Repetitions {
		if r.Burst == nil {
			continue
		}
		for _, ms := range r.Burst.LatenciesMS {
			out = append(out, float64(ms)/1000)
		}
	}
	sort.Float64s(out)
	return out
}

// HasBursts reports whether any contender has a repetition with a burst.
func (r *Run) HasBursts() bool {
	for _, c := range r.Contenders {
		for _, rep := range c.Repetitions {
			if rep.Burst != nil {
				return true
			}
		}
	}
	return false
}

// Flag returns the value the run's flag name had ("" when it has none).
func (r *Run) Flag(name string) string {
	name = strings.TrimLeft(name, "-")
	for _, f := range r.Flags {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}
