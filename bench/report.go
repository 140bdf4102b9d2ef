// The report command: a results file as the markdown the benchmarks page shows, so that the
// page's tables are pasted from a file and not typed from a terminal.

package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cloudnative-czs/vm-controller/bench/record"
)

// reportCommand prints the report of each results file named: go -C bench run . report FILE...
func reportCommand(args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("report: name a results file (go -C bench run . report results/FILE.json)")
	}
	for i, path := range args {
		run, err := record.Read(path)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(out)
		}
		writeReport(out, run, fromCheckout(path))
	}
	return nil
}

// fromCheckout is path from the checkout's root (bench/results/FILE.json) when it is inside
// the checkout, so that the page names a results file the same wherever the report ran;
// otherwise path as given.
func fromCheckout(path string) string {
	root, err := checkoutRoot()
	if err != nil {
		return path
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return path
	}
	return filepath.ToSlash(rel)
}

// writeReport writes run as markdown: what ran where, the table of each contender's medians
// (the page's table), each repetition's figures, the ratios against the peer, and the named
// figures.
func writeReport(w io.Writer, run *record.Run, path string) {
	reps := 0
	for _, c := range run.Contenders {
		reps = max(reps, len(c.Repetitions))
	}
	vms := ""
	if v := run.Flag("vms"); v != "" {
		vms = group(v) + " VMs, "
	}
	fmt.Fprintf(w, "### %s: %s%s (%s UTC)\n\n", run.Scenario, vms, medianOf(reps), run.Started.UTC().Format("2006-01-02 15:04"))
	commit := run.Commit
	if len(commit) > 7 {
		commit = commit[:7]
	}
	if run.Dirty {
		commit += " with uncommitted changes"
	}
	m := run.Machine
	fmt.Fprintf(w, "`go -C bench run . %s`, vm-controller at `%s`, %s to %s UTC, on %d cores (%s, %.1f GB). Results file: `%s`.\n",
		strings.TrimSpace(run.Scenario+" "+strings.Join(run.Args, " ")), commit, run.Started.UTC().Format("15:04"),
		run.Finished.UTC().Format("15:04"), m.Cores, orUnknown(m.CPUModel), m.MemoryGB, path)
	if run.HasBursts() {
		writeBurstTables(w, run, reps)
	}
	writeFigures(w, run)
}

// writeBurstTables writes the medians' table, the repetitions' and the ratios to the peer.
func writeBurstTables(w io.Writer, run *record.Run, reps int) {
	fmt.Fprintf(w, "\n| controller (%s) | VMs/s | p50 create->Active | CPU-ms/VM | API server CPU-ms/VM | machine CPU-ms/VM | peak RSS MB | writes/VM (VM patch, status patch, pod create, claim create) | all writes/VM | 409/VM | Events/VM |\n", medianOf(reps))
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	medians := map[string]*record.Burst{}
	for _, c := range run.Contenders {
		b := record.Median(c.Repetitions).Burst
		if b == nil {
			continue
		}
		medians[c.Name] = b
		fmt.Fprintf(w, "| %s | %.1f | %.1f s | %.2f | %.2f | %.2f | %.0f | %s, %s, %s, %s | %s | %s | %s |\n", c.Name, b.VMsPerSec, b.P50,
			perVM(b.ControllerCPU, b.VMs), perVM(b.APIServerCPU, b.VMs), perVM(b.MachineCPU, b.VMs), b.PeakRSSMB,
			short(b.WritesPerVM["virtualmachines PATCH"]), short(b.WritesPerVM["virtualmachines/status PATCH"]),
			short(b.WritesPerVM["pods POST"]), short(b.WritesPerVM["persistentvolumeclaims POST"]), short(writesPerVM(b)),
			short(b.ConflictsPerVM), short(b.EventsPerVM))
	}
	if reps > 1 {
		fmt.Fprintln(w, "\nEach repetition, in the order it ran (its place in the repetition in brackets):")
		fmt.Fprintln(w, "\n| controller | VMs/s | CPU-ms/VM | API server CPU-ms/VM | machine CPU-ms/VM |")
		fmt.Fprintln(w, "|---|---|---|---|---|")
		for _, c := range run.Contenders {
			var perSec, cpu, api, machine []string
			for _, r := range c.Repetitions {
				if b := r.Burst; b != nil {
					perSec = append(perSec, fmt.Sprintf("%.1f [%d]", b.VMsPerSec, r.Position))
					cpu = append(cpu, fmt.Sprintf("%.2f", perVM(b.ControllerCPU, b.VMs)))
					api = append(api, fmt.Sprintf("%.2f", perVM(b.APIServerCPU, b.VMs)))
					machine = append(machine, fmt.Sprintf("%.2f", perVM(b.MachineCPU, b.VMs)))
				}
			}
			if perSec != nil {
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", c.Name, strings.Join(perSec, ", "), strings.Join(cpu, ", "),
					strings.Join(api, ", "), strings.Join(machine, ", "))
			}
		}
	}
	writeTeardownTable(w, run, reps, medians)
	var peer *record.Burst
	for _, c := range run.Contenders {
		if c.Peer && medians[c.Name] != nil {
			peer = medians[c.Name]
			break
		}
	}
	if peer == nil {
		return
	}
	fmt.Fprintf(w, "\nAgainst the peer (%s):\n", medianOf(reps))
	fmt.Fprintln(w)
	for _, c := range run.Contenders {
		if b := medians[c.Name]; b != nil && !c.Peer {
			fmt.Fprintf(w, "- %s: **%.2fx its VMs/s**, **%.2fx its CPU per VM**, %.2fx the machine's CPU per VM\n", c.Name,
				b.VMsPerSec/peer.VMsPerSec, perVM(b.ControllerCPU, b.VMs)/perVM(peer.ControllerCPU, peer.VMs),
				perVM(b.MachineCPU, b.VMs)/perVM(peer.MachineCPU, peer.VMs))
		}
	}
}

// writeTeardownTable writes the teardowns of a comparison (the namespace deleted with the
// controller running): each contender's median time and each repetition's, the time until
// the VMs were gone, and what the controller did on their way out; "-" where a file from before those were measured has
// none.
func writeTeardownTable(w io.Writer, run *record.Run, reps int, medians map[string]*record.Burst) {
	measured := false
	for _, b := range medians {
		measured = measured || b.TeardownSeconds > 0
	}
	if !measured {
		return
	}
	fmt.Fprintf(w, "\nTeardown, the namespace deleted with the controller running, until it is gone (%s):\n", medianOf(reps))
	fmt.Fprintln(w, "\n| controller | teardown | each repetition | VMs gone | VM writes/VM on the way out (VM patch, status patch) | 409/VM | retries/VM |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, c := range run.Contenders {
		b := medians[c.Name]
		if b == nil {
			continue
		}
		var each []string
		for _, r := range c.Repetitions {
			if r.Burst != nil {
				each = append(each, fmt.Sprintf("%.1f s", r.Burst.TeardownSeconds))
			}
		}
		gone, writes, conflicts, retries := "-", "-", "-", "-"
		if t := b.Teardown; t != nil {
			gone = fmt.Sprintf("%.1f s", t.VMsGoneSeconds)
			writes = short(t.WritesPerVM["virtualmachines PATCH"]) + ", " + short(t.WritesPerVM["virtualmachines/status PATCH"])
			conflicts, retries = short(t.ConflictsPerVM), short(t.RetriesPerVM)
		}
		fmt.Fprintf(w, "| %s | %.1f s | %s | %s | %s | %s | %s |\n", c.Name, b.TeardownSeconds, strings.Join(each, ", "), gone, writes,
			conflicts, retries)
	}
}

// writeFigures writes the named figures of each contender: the median and, with more than
// one repetition, each repetition's value.
func writeFigures(w io.Writer, run *record.Run) {
	for _, c := range run.Contenders {
		med := record.Median(c.Repetitions)
		if len(med.Figures) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n| %s: figure | %s | unit |", c.Name, medianOf(len(c.Repetitions)))
		if len(c.Repetitions) > 1 {
			fmt.Fprint(w, " each repetition |")
		}
		fmt.Fprintln(w)
		if len(c.Repetitions) > 1 {
			fmt.Fprintln(w, "|---|---|---|---|")
		} else {
			fmt.Fprintln(w, "|---|---|---|")
		}
		for _, f := range med.Figures {
			fmt.Fprintf(w, "| %s | %s | %s |", f.Name, short(f.Value), f.Unit)
			if len(c.Repetitions) > 1 {
				var each []string
				for _, r := range c.Repetitions {
					if v, ok := r.Figure(f.Name); ok {
						each = append(each, short(v.Value))
					} else {
						each = append(each, "-")
					}
				}
				fmt.Fprintf(w, " %s |", strings.Join(each, ", "))
			}
			fmt.Fprintln(w)
		}
	}
}

func medianOf(reps int) string {
	if reps == 1 {
		return "one repetition"
	}
	return "median of " + strconv.Itoa(reps)
}

func perVM(sec float64, vms int) float64 {
	if vms == 0 {
		return 0
	}
	return sec * 1000 / float64(vms)
}

// short is v with up to three decimals and no trailing zeros: 1, 2.5, 0.001.
func short(v float64) string {
	s := strconv.FormatFloat(v, 'f', 3, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

// group writes a whole number with thousands separated by commas, as the page does: 2,000.
func group(n string) string {
	if _, err := strconv.Atoi(n); err != nil || len(n) <= 3 {
		return n
	}
	var b strings.Builder
	for i, r := range n {
		if i > 0 && (len(n)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "CPU model unknown"
	}
	return s
}
