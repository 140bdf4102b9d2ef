package memory

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// TestParseHosts: a nodes.yaml reads as its nodes, each with its figures, and the name,
// labels, taints and cordon it writes (a node without a name is node-1, node-2, ... by its
// place); the file of the first form, cpu and memory only, reads as it always did; [] is a
// cluster with no node; a wrong key, a quantity that does not parse, an effect that is none, a
// name given twice and an empty file are refused in the file's terms.
func TestParseHosts(t *testing.T) {
	for name, tc := range map[string]struct {
		in, want, err string
	}{
		"cpu and memory only": {in: "- {cpu: \"32\", memory: 128Gi}\n- {cpu: \"16\", memory: 256Gi}\n",
			want: "node-1 cpu 32 memory 128Gi; node-2 cpu 16 memory 256Gi"},
		"none": {in: "[]\n", want: ""},
		"labels, taints, cordon": {
			in: "- {cpu: \"4\", memory: 8Gi}\n" +
				"- {name: big, cpu: \"96\", memory: 512Gi, labels: {size: big}, unschedulable: true,\n" +
				"   taints: [{key: dedicated, value: db, effect: NoSchedule}, {key: spot, effect: PreferNoSchedule}]}\n",
			want: "node-1 cpu 4 memory 8Gi; big cpu 96 memory 512Gi labels map[size:big] taints [dedicated=db:NoSchedule spot:PreferNoSchedule] cordoned"},
		"empty":        {in: "", err: "write []"},
		"wrong key":    {in: "- {cpus: \"32\", memory: 128Gi}\n", err: "is not a key of a node (name, cpu, memory, labels, taints, unschedulable)"},
		"wrong taint":  {in: "- {cpu: \"32\", memory: 128Gi, taints: [{key: a, effect: NoSchedule, time: now}]}\n", err: "is not a key of a taint (key, value, effect)"},
		"bad cpu":      {in: "- {cpu: lots, memory: 128Gi}\n", err: `node 0: cpu "lots"`},
		"bad effect":   {in: "- {cpu: \"2\", memory: 1Gi, taints: [{key: a, effect: Never}]}\n", err: `node 0: taint 0: effect "Never"`},
		"name twice":   {in: "- {name: a, cpu: \"2\", memory: 1Gi}\n- {name: a, cpu: \"2\", memory: 1Gi}\n", err: "node 1: the name a is another node's"},
		"name clashes": {in: "- {cpu: \"2\", memory: 1Gi}\n- {name: node-1, cpu: \"2\", memory: 1Gi}\n", err: "node 1: the name node-1"},
	} {
		t.Run(name, func(t *testing.T) {
			h, err := ParseHosts([]byte(tc.in))
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err == "":
				if got := hostsLine(h); got != tc.want {
					t.Errorf("hosts %s, want %s", got, tc.want)
				}
			}
		})
	}
	b := New()
	if b.Hosts() != nil {
		t.Error("a new backend knows hosts")
	}
}

// hostsLine is h as TestParseHosts compares it.
func hostsLine(h *backend.Hosts) string {
	var out []string
	for o := range h.All() {
		s := fmt.Sprintf("%s cpu %s memory %s", o.Name, o.CPU.String(), o.Memory.String())
		if len(o.Labels) > 0 {
			s += fmt.Sprintf(" labels %v", o.Labels)
		}
		if len(o.Taints) > 0 {
			var taints []string
			for _, t := range o.Taints {
				taints = append(taints, t.ToString())
			}
			s += fmt.Sprintf(" taints %v", taints)
		}
		if o.Unschedulable {
			s += " cordoned"
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}
