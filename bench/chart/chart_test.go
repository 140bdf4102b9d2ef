package chart

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot/plotter"

	"github.com/cloudnative-czs/vm-controller/bench/record"
	"github.com/cloudnative-czs/vm-controller/internal/golden"
)

// TestCharts: the charts of a small fixed results file (two contenders, two repetitions of 8
// VMs each) are the golden SVGs; go -C bench test ./chart -update rewrites them after an
// intended change, for review in the diff (open them in a browser).
func TestCharts(t *testing.T) {
	run, err := record.Read(filepath.Join("testdata", "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, draw := range map[string]func(*record.Run) ([]byte, error){"latency": Latency, "active": Active} {
		t.Run(name, func(t *testing.T) {
			svg, err := draw(run)
			if err != nil {
				t.Fatal(err)
			}
			again, err := draw(run)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(svg, again) {
				t.Fatal("two renderings of the same run differ")
			}
			golden.Check(t, filepath.Join("testdata", name+".svg"), svg)
		})
	}
}

// TestWrite: the charts go next to the results file, named after it.
func TestWrite(t *testing.T) {
	run, err := record.Read(filepath.Join("testdata", "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "2026-11-25T100000Z-compare.json")
	files, err := Write(run, path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(filepath.Dir(path), "2026-11-25T100000Z-compare-latency.svg"),
		filepath.Join(filepath.Dir(path), "2026-11-25T100000Z-compare-active.svg")}
	if len(files) != 2 || files[0] != want[0] || files[1] != want[1] {
		t.Fatalf("Write wrote %v, want %v", files, want)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(b, []byte("<svg")) {
			t.Errorf("%s: %v, not an SVG", f, err)
		}
	}
}

// TestNothingToDraw: a run without bursts (leader, usage) is refused by name, and nothing is
// written.
func TestNothingToDraw(t *testing.T) {
	run := &record.Run{Scenario: "leader", Contenders: []record.Contender{{Name: "vm-controller",
		Repetitions: []record.Repetition{{Rep: 1, Figures: []record.Figure{{Name: "SIGTERM: signal to new leader", Value: 0.6, Unit: "s"}}}}}}}
	dir := t.TempDir()
	if _, err := Write(run, filepath.Join(dir, "x-leader.json")); !errors.Is(err, record.ErrNoBursts) {
		t.Errorf("Write = %v, want ErrNoBursts", err)
	}
	if _, err := Latency(run); !errors.Is(err, record.ErrNoBursts) {
		t.Errorf("Latency = %v, want ErrNoBursts", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("files written: %v", left)
	}
}

// TestThin: a long series keeps maxPoints, evenly spaced, its first and last among them; a
// short one is kept whole.
func TestThin(t *testing.T) {
	long := make(plotter.XYs, 100_001)
	for i := range long {
		long[i] = plotter.XY{X: float64(i), Y: float64(i)}
	}
	got := thin(long)
	if len(got) != maxPoints || got[0] != long[0] || got[len(got)-1] != long[len(long)-1] {
		t.Errorf("thin(100,001 points) = %d points from %v to %v", len(got), got[0], got[len(got)-1])
	}
	for i := 1; i < len(got); i++ {
		if d := got[i].X - got[i-1].X; d < 200 || d > 201 {
			t.Fatalf("points %d and %d are %v apart, want about 200.4", i-1, i, d)
		}
	}
	if short := long[:10]; len(thin(short)) != 10 {
		t.Errorf("thin(10 points) = %d points", len(thin(short)))
	}
}
