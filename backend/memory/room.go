package memory

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/strictyaml"
)

// The hosts' room (backend.Rooms): none by default, as a backend that does not watch its
// hosts knows none; a test sets it (SetRoom), and a golden case reads it from its nodes.yaml
// (ParseRoom), to show what a refused resize does on a cluster where no node has room for the
// new size.

var _ backend.Rooms = (*Backend)(nil)

// SetRoom sets the room the backend reports of its hosts; nil: it knows none.
func (b *Backend) SetRoom(r *backend.Room) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r == nil {
		b.room = nil
		return
	}
	c := *r
	b.room = &c
}

// Room returns a copy of the room set, or nil when none is (backend.Rooms).
func (b *Backend) Room() *backend.Room {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.room == nil {
		return nil
	}
	c := *b.room
	return &c
}

// ParseRoom reads the room of a cluster's hosts, as a golden case's nodes.yaml writes it: the
// allocatable cpu and memory of each node that takes new servers (a cordoned one is left
// out, as the pods backend leaves it out),
//
//   - {cpu: "32", memory: 128Gi}
//   - {cpu: "16", memory: 256Gi}
//
// An empty list is a cluster none of whose nodes takes a new server.
func ParseRoom(data []byte) (*backend.Room, error) {
	var in []roomNode
	dec := strictyaml.NewDecoder(data)
	if err := dec.Decode(&in); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the nodes are empty: write [] for a cluster where no node takes a new server")
		}
		return nil, errors.New(strings.ReplaceAll(roomTerms.Replace(err.Error()), "\n", " "))
	}
	r := &backend.Room{Hosts: len(in)}
	for i, n := range in {
		cpu, err := resource.ParseQuantity(n.CPU)
		if err != nil {
			return nil, fmt.Errorf("node %d: cpu %q: %w", i, n.CPU, err)
		}
		mem, err := resource.ParseQuantity(n.Memory)
		if err != nil {
			return nil, fmt.Errorf("node %d: memory %q: %w", i, n.Memory, err)
		}
		if cpu.Cmp(r.CPU) > 0 {
			r.CPU = cpu
		}
		if mem.Cmp(r.Memory) > 0 {
			r.Memory = mem
		}
	}
	return r, nil
}

// roomNode is one node of a nodes.yaml.
type roomNode struct {
	CPU    string `yaml:"cpu"`
	Memory string `yaml:"memory"`
}

// roomTerms rewrites yaml.v3's messages, which name Go types, in the terms of the file.
var roomTerms = strings.NewReplacer(
	"yaml: unmarshal errors:\n  ", "", "\n  ", "; ", "yaml: ", "",
	" not found in type memory.roomNode", " is not a key of a node (cpu, memory)",
	" into memory.roomNode", " into a node (want a mapping)", " into []memory.roomNode", " into a list of nodes",
)
