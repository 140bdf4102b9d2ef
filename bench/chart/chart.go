// Package chart draws a bench results file (bench/record) as the pictures a reader would
// rather look at than read: how long VMs took from create to Active, as a distribution per
// contender, and how many VMs were Active over the burst, per contender. They are SVG files
// written next to the results file, drawn with gonum.org/v1/plot, whose output is the same
// for the same input (so a golden file pins it).
package chart

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/cloudnative-czs/vm-controller/bench/record"
)

// maxPoints bounds the points of one series: a burst of 100,000 VMs has as many steps, which
// the eye cannot tell from a few hundred, and an SVG of them would be megabytes.
const maxPoints = 500

// The size of each chart.
const width, height = 7 * vg.Inch, 4.5 * vg.Inch

// margin is kept free on the right (see render).
const margin = 12 * vg.Millimeter

// Files are the charts of the results file at path: path without its .json, and a suffix.
func Files(path string) (latency, active string) {
	base := strings.TrimSuffix(path, ".json")
	return base + "-latency.svg", base + "-active.svg"
}

// Write draws run's charts next to its results file at path and returns their paths.
func Write(run *record.Run, path string) ([]string, error) {
	if !run.HasBursts() {
		return nil, fmt.Errorf("draw %s: %w", path, record.ErrNoBursts)
	}
	latencyFile, activeFile := Files(path)
	var written []string
	for _, c := range []struct {
		file string
		draw func(*record.Run) ([]byte, error)
	}{{latencyFile, Latency}, {activeFile, Active}} {
		svg, err := c.draw(run)
		if err != nil {
			return written, err
		}
		if err := os.WriteFile(c.file, svg, 0o644); err != nil {
			return written, fmt.Errorf("write chart: %w", err)
		}
		written = append(written, c.file)
	}
	return written, nil
}

// Latency draws the distribution of create->Active over every VM of every repetition, one
// line per contender: the share of VMs Active within x seconds of their create.
func Latency(run *record.Run) ([]byte, error) {
	p := newPlot(run, "create → Active per VM, every repetition", "seconds from the VM's create to Active", "share of VMs")
	p.Y.Min, p.Y.Max = 0, 1
	i := 0
	for _, c := range run.Contenders {
		lat := c.Latencies()
		if len(lat) == 0 {
			continue
		}
		xys := make(plotter.XYs, 0, len(lat)+1)
		xys = append(xys, plotter.XY{X: 0, Y: 0})
		for j, v := range lat {
			xys = append(xys, plotter.XY{X: v, Y: float64(j+1) / float64(len(lat))})
		}
		if err := addLine(p, i, fmt.Sprintf("%s (%d VMs)", c.Name, len(lat)), thin(xys)); err != nil {
			return nil, err
		}
		i++
	}
	if i == 0 {
		return nil, record.ErrNoBursts
	}
	p.Y.Max = 1 + headroom(i)
	return render(p)
}

// Active draws the VMs Active over the burst, from its first create, one line per
// contender: its median repetition (by the burst's time), a real run, since a median of
// curves is none.
func Active(run *record.Run) ([]byte, error) {
	p := newPlot(run, "VMs Active over the burst (each contender's median repetition)", "seconds from the first create", "VMs Active")
	p.Y.Min = 0
	i, most := 0, 0
	for _, c := range run.Contenders {
		rep := c.MedianRep()
		if rep == nil {
			continue
		}
		b := rep.Burst
		xys := make(plotter.XYs, 0, len(b.ActiveMS)+1)
		xys = append(xys, plotter.XY{X: 0, Y: 0})
		for j, ms := range b.ActiveMS {
			xys = append(xys, plotter.XY{X: float64(ms) / 1000, Y: float64(j + 1)})
		}
		most = max(most, len(b.ActiveMS))
		label := fmt.Sprintf("%s (rep %d: %.1f VMs/s)", c.Name, rep.Rep, b.VMsPerSec)
		if err := addLine(p, i, label, thin(xys)); err != nil {
			return nil, err
		}
		i++
	}
	if i == 0 {
		return nil, record.ErrNoBursts
	}
	p.Y.Max = float64(most) * (1 + headroom(i))
	return render(p)
}

// headroom is the share of the y axis kept free above the highest point for the legend of n
// series, which sits in the top left: the fastest contender's line reaches the top while
// the others still rise, and would run through the legend.
func headroom(n int) float64 { return 0.05 * float64(n+1) }

// newPlot is a plot titled with the chart and the run: scenario, VMs per burst, commit,
// date and machine, so that a picture found on its own still says what it shows.
func newPlot(run *record.Run, title, x, y string) *plot.Plot {
	p := plot.New()
	commit := run.Commit
	if len(commit) > 7 {
		commit = commit[:7]
	}
	if run.Dirty {
		commit += "+changes"
	}
	vms := ""
	if v := run.Flag("vms"); v != "" {
		vms = ", " + v + " VMs"
	}
	p.Title.Text = fmt.Sprintf("%s\n%s%s, %s, %s UTC, %d cores", title, run.Scenario, vms, commit,
		run.Started.UTC().Format("2006-01-02 15:04"), run.Machine.Cores)
	p.X.Label.Text, p.Y.Label.Text = x, y
	p.X.Min = 0
	p.Add(plotter.NewGrid())
	// Both charts rise from the bottom left, so the top left is free. The offsets leave room
	// for a viewer whose fallback font is wider than the one the text was measured with
	// (the SVG names Liberation fonts without embedding them, which would add hundreds of KB).
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(24), -vg.Points(8)
	return p
}

// addLine adds the i-th series, in a colour and dash of its own.
func addLine(p *plot.Plot, i int, label string, xys plotter.XYs) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("draw %s: %w", label, err)
	}
	l.Color = plotutil.Color(i)
	l.Dashes = plotutil.Dashes(i)
	l.Width = vg.Points(1.5)
	l.StepStyle = plotter.PostStep // a VM is Active from its instant on
	p.Add(l)
	p.Legend.Add(label, l)
	return nil
}

// thin keeps at most maxPoints of a series, evenly spaced, the first and last always.
func thin(xys plotter.XYs) plotter.XYs {
	if len(xys) <= maxPoints {
		return xys
	}
	out := make(plotter.XYs, 0, maxPoints)
	step := float64(len(xys)-1) / float64(maxPoints-1)
	for k := range maxPoints {
		out = append(out, xys[int(float64(k)*step+0.5)])
	}
	return out
}

func render(p *plot.Plot) ([]byte, error) {
	c := vgsvg.New(width, height)
	// A margin on the right, for the same wider fallback font: the last tick's label is
	// centred on the right edge of the axis.
	p.Draw(draw.Crop(draw.New(c), 0, -margin, 0, 0))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("render chart: %w", err)
	}
	return buf.Bytes(), nil
}
