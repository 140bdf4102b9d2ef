package memory

import (
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/strictyaml"
)

// The hosts (backend.Rooms): none known by default, as a backend that does not watch its
// hosts knows none; a test sets them (SetHosts), and a golden case reads them from its
// nodes.yaml (ParseHosts), to show what a change that needs a new server does on a cluster
// where no node the VM's placement admits has room for it.

var _ backend.Rooms = (*Backend)(nil)

// SetHosts sets the hosts the backend reports; nil: it knows none.
func (b *Backend) SetHosts(h *backend.Hosts) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hosts = h
}

// Hosts returns the hosts set, or nil when none are (backend.Rooms). A snapshot is never
// changed, so it is shared, not copied.
func (b *Backend) Hosts() *backend.Hosts {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hosts
}

// ParseHosts reads a cluster's nodes, as a golden case's nodes.yaml writes them: each node's
// allocatable cpu and memory, and, where they matter, its name (node-1, node-2, ... in order
// when not given), labels, taints and cordon (unschedulable),
//
//   - {cpu: "32", memory: 128Gi}
//   - {name: big, cpu: "96", memory: 512Gi, labels: {size: big}}
//   - {cpu: "96", memory: 512Gi, taints: [{key: dedicated, value: db, effect: NoSchedule}]}
//   - {cpu: "96", memory: 512Gi, unschedulable: true}
//
// An empty list is a cluster with no node.
func ParseHosts(data []byte) (*backend.Hosts, error) {
	var in []roomNode
	dec := strictyaml.NewDecoder(data)
	if err := dec.Decode(&in); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the nodes are empty: write [] for a cluster with no node")
		}
		return nil, errors.New(strings.ReplaceAll(roomTerms.Replace(err.Error()), "\n", " "))
	}
	hosts := make([]backend.Host, 0, len(in))
	names := map[string]bool{}
	for i, n := range in {
		h := backend.Host{Name: n.Name, Labels: n.Labels, Unschedulable: n.Unschedulable}
		if h.Name == "" {
			h.Name = fmt.Sprintf("node-%d", i+1)
		}
		if names[h.Name] {
			return nil, fmt.Errorf("node %d: the name %s is another node's", i, h.Name)
		}
		names[h.Name] = true
		var err error
		if h.CPU, err = resource.ParseQuantity(n.CPU); err != nil {
			return nil, fmt.Errorf("node %d: cpu %q: %w", i, n.CPU, err)
		}
		if h.Memory, err = resource.ParseQuantity(n.Memory); err != nil {
			return nil, fmt.Errorf("node %d: memory %q: %w", i, n.Memory, err)
		}
		for j, t := range n.Taints {
			switch e := corev1.TaintEffect(t.Effect); e {
			case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
				h.Taints = append(h.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: e})
			default:
				return nil, fmt.Errorf("node %d: taint %d: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", i, j, t.Effect)
			}
		}
		hosts = append(hosts, h)
	}
	return backend.NewHosts(hosts), nil
}

// roomNode is one node of a nodes.yaml.
type roomNode struct {
	Name          string            `yaml:"name"`
	CPU           string            `yaml:"cpu"`
	Memory        string            `yaml:"memory"`
	Labels        map[string]string `yaml:"labels"`
	Taints        []roomTaint       `yaml:"taints"`
	Unschedulable bool              `yaml:"unschedulable"`
}

// roomTaint is a taint of a node of a nodes.yaml.
type roomTaint struct {
	Key    string `yaml:"key"`
	Value  string `yaml:"value"`
	Effect string `yaml:"effect"`
}

// roomTerms rewrites yaml.v3's messages, which name Go types, in the terms of the file.
var roomTerms = strings.NewReplacer(
	"yaml: unmarshal errors:\n  ", "", "\n  ", "; ", "yaml: ", "",
	" not found in type memory.roomNode", " is not a key of a node (name, cpu, memory, labels, taints, unschedulable)",
	" not found in type memory.roomTaint", " is not a key of a taint (key, value, effect)",
	" into memory.roomNode", " into a node (want a mapping)", " into []memory.roomNode", " into a list of nodes",
	" into memory.roomTaint", " into a taint (want a mapping)", " into []memory.roomTaint", " into a list of taints",
)
