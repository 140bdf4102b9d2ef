package memory

import (
	"fmt"
	"strings"
	"testing"
)

// TestParseRoom: a nodes.yaml reads as the largest cpu and memory of its nodes, each on its
// own, and their number; [] is a cluster where no node takes a new server; a wrong key, a
// quantity that does not parse and an empty file are refused in the file's terms.
func TestParseRoom(t *testing.T) {
	for name, tc := range map[string]struct {
		in, want, err string
	}{
		"two nodes": {in: "- {cpu: \"32\", memory: 128Gi}\n- {cpu: \"16\", memory: 256Gi}\n", want: "cpu 32, memory 256Gi, 2 nodes"},
		"none":      {in: "[]\n", want: "cpu 0, memory 0, 0 nodes"},
		"empty":     {in: "", err: "write []"},
		"wrong key": {in: "- {cpus: \"32\", memory: 128Gi}\n", err: "is not a key of a node (cpu, memory)"},
		"bad cpu":   {in: "- {cpu: lots, memory: 128Gi}\n", err: `node 0: cpu "lots"`},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := ParseRoom([]byte(tc.in))
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err == "":
				if got := fmt.Sprintf("cpu %s, memory %s, %d nodes", r.CPU.String(), r.Memory.String(), r.Hosts); got != tc.want {
					t.Errorf("room %s, want %s", got, tc.want)
				}
			}
		})
	}
	b := New()
	if b.Room() != nil {
		t.Error("a new backend knows a room")
	}
}
