package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/strictyaml"
)

// serverYAML is how a person writes down a server the backend observed: in the golden cases
// of the decision (testdata/decide) and for the plan command's --server.
type serverYAML struct {
	Name       string        `yaml:"name"`
	ID         string        `yaml:"id"`
	State      backend.State `yaml:"state"`
	Detail     string        `yaml:"detail"`
	Message    string        `yaml:"message"`
	Deleting   bool          `yaml:"deleting"`
	Since      string        `yaml:"since"` // how long before now it entered its state, such as 15s
	Spec       specYAML      `yaml:"spec"`
	Resize     resizeYAML    `yaml:"resize"`     // a resize under way, if any
	Disk       string        `yaml:"disk"`       // the VM's disk it mounts, if any
	Node       string        `yaml:"node"`       // the host it runs on, if placed
	NodeGone   bool          `yaml:"nodeGone"`   // its host is gone, not only silent (backend.Server.NodeGone)
	NodeSilent bool          `yaml:"nodeSilent"` // a Pending server's host does not answer (backend.Server.NodeSilent)
	IP         string        `yaml:"ip"`         // its address, if it has one
	Waiting    waitingYAML   `yaml:"waiting"`    // why a pending server waits, if it says
	// Whether it is being evicted (backend.Server's Cordoned and Disruption).
	Cordoned   bool                `yaml:"cordoned"`
	Disruption *backend.Disruption `yaml:"disruption"`
	Lingers    lingersYAML         `yaml:"lingers"` // ended, and what realises it runs on (backend.Server.Lingers)
	// The tolerations admission gave it beyond its placement's (backend.Server.AdmittedTolerations).
	AdmittedTolerations []map[string]any `yaml:"admittedTolerations"`
	// Its tolerations were changed after it was made, and none is counted
	// (backend.Server.TolerationsChanged).
	TolerationsChanged bool `yaml:"tolerationsChanged"`
}

// lingersYAML is a server's lingers: true, or the names of what keeps it running, which say
// it lingers too (backend.Server.KeptBy: for pods, the sidecars), as [istio-proxy].
type lingersYAML struct {
	on     bool
	keptBy []string
}

// UnmarshalYAML reads lingers as a bool or as a list of names, sorted as the pods backend
// gives them (backend.Server.KeptBy), so that a plan says what the controller would.
func (l *lingersYAML) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.SequenceNode {
		if err := n.Decode(&l.keptBy); err != nil || slices.Contains(l.keptBy, "") {
			return errors.New("lingers: want true, false, or the names of what keeps the server running, as [istio-proxy]")
		}
		slices.Sort(l.keptBy)
		l.keptBy = slices.Compact(l.keptBy)
		l.on = len(l.keptBy) > 0
		return nil
	}
	if err := n.Decode(&l.on); err != nil {
		return errors.New("lingers: want true, false, or the names of what keeps the server running, as [istio-proxy]")
	}
	return nil
}

// waitingYAML is backend.Waiting written down: its reason, message and since when (relative
// to now, as since is).
type waitingYAML struct {
	Reason  backend.WaitReason `yaml:"reason"`
	Message string             `yaml:"message"`
	Since   string             `yaml:"since"`
	BackOff bool               `yaml:"backOff"` // the host waits to try again (backend.Waiting.BackOff)
}

// waitReasons are the reasons a written-down server may wait for.
var waitReasons = []backend.WaitReason{backend.WaitUnschedulable, backend.WaitImage, backend.WaitStart}

// parse is the wait, with since counted back from now.
func (w waitingYAML) parse(now time.Time) (backend.Waiting, error) {
	if w == (waitingYAML{}) {
		return backend.Waiting{}, nil
	}
	known := false
	for _, r := range waitReasons {
		known = known || w.Reason == r
	}
	if !known {
		return backend.Waiting{}, fmt.Errorf("waiting.reason %q: want %s, %s or %s", w.Reason, backend.WaitUnschedulable, backend.WaitImage, backend.WaitStart)
	}
	out := backend.Waiting{Reason: w.Reason, Message: w.Message, BackOff: w.BackOff}
	if w.Since != "" {
		d, err := time.ParseDuration(w.Since)
		if err != nil {
			return backend.Waiting{}, fmt.Errorf("waiting.since: %w", err)
		}
		out.Since = now.Add(-d)
	}
	return out, nil
}

type specYAML struct {
	CPU      string `yaml:"cpu"`
	Memory   string `yaml:"memory"`
	RootDisk string `yaml:"rootDisk"`
	Image    string `yaml:"image"`
	// Placement is the placement it was made with, as a VM's spec.placement says it.
	Placement map[string]any `yaml:"placement"`
	// Restart is the restart request it was made to carry out, if any (backend.Spec.Restart).
	Restart string `yaml:"restart"`
}

// yamlTerms rewrites yaml.v3's messages, which name Go types, in the terms of the file.
var yamlTerms = strings.NewReplacer(
	"yaml: unmarshal errors:\n  ", "", "\n  ", "; ", "yaml: ", "",
	" not found in type memory.serverYAML", " is not a key of a server (name, id, state, detail, message, deleting, since, spec, resize, disk, node, nodeGone, nodeSilent, ip, waiting, cordoned, disruption, lingers, admittedTolerations, tolerationsChanged)",
	" not found in type memory.specYAML", " is not a key of a server's spec (cpu, memory, rootDisk, image, placement, restart)",
	" into memory.serverYAML", " into a server (want a mapping)",
	" into memory.specYAML", " into a server's spec (want a mapping)",
	" not found in type memory.resizeYAML", " is not a key of a server's resize (state, message, cpu, memory)",
	" into memory.resizeYAML", " into a server's resize (want a mapping)",
	" not found in type memory.waitingYAML", " is not a key of a server's waiting (reason, message, since)",
	" into memory.waitingYAML", " into a server's waiting (want a mapping)",
	" not found in type backend.Disruption", " is not a key of a server's disruption (reason, message)",
	" into backend.Disruption", " into a server's disruption (want a mapping)",
)

// states are the states a written-down server may be in.
var states = []backend.State{backend.StatePending, backend.StateStarting, backend.StateReady,
	backend.StateFailed, backend.StateStopped, backend.StateLost}

// ParseServer reads a server written down as YAML:
//
//	name: test-vm-server
//	id: pod-uid-1
//	state: Failed          # Pending, Starting, Ready, Failed, Stopped or Lost
//	detail: Failed         # the backend's own word (for pods: the phase)
//	message: ""            # why, when the backend says
//	deleting: false
//	since: 30s             # for Failed and Stopped: how long before now
//	spec: {cpu: "2", memory: 4G, rootDisk: 40G, image: registry.k8s.io/pause:3.10}
//	resize: {state: InProgress, message: "", cpu: "1", memory: 4G}  # optional: cpu and memory in effect
//	disk: test-vm-rootdisk # optional: the VM's disk it mounts; its spec then has no rootDisk
//	node: kwok-node-0      # optional: where it runs
//	nodeSilent: true       # optional, for Pending: its node does not answer (backend.Server.NodeSilent)
//	ip: 10.0.0.7           # optional: its address
//	waiting: {reason: Unschedulable, message: "0/3 nodes are available", since: 10m}  # optional, or ImagePull
//	cordoned: true         # optional: its node takes no new servers (a drain cordoned it)
//	disruption: {reason: EvictionByEvictionAPI, message: ""}  # optional: it is being evicted
//	lingers: true          # optional, for Failed and Stopped: what realises it runs on (a sidecar keeps the pod Running)
//	lingers: [istio-proxy] # the same, naming what keeps it running (backend.Server.KeptBy)
//	admittedTolerations: [{key: dedicated, operator: Equal, value: vms, effect: NoSchedule}]  # optional: given at admission, beyond its placement's
//	tolerationsChanged: true  # optional: its tolerations were changed after it was made (kubectl patch), so none counts as admission's
//
// A spec may carry a placement, as a VM's spec.placement writes it
// (placement: {nodeSelector: {disktype: ssd}}), and the restart request the server was made
// to carry out (restart: "2026-06-01T11:59:30Z"; backend.Spec.Restart).
//
// Times are relative to now so that a case means the same whatever clock it runs with.
// Unknown keys, an unknown state and malformed quantities are errors; a rootDisk may be left
// out only by a server that mounts a disk.
func ParseServer(data []byte, now time.Time) (*backend.Server, error) {
	var s serverYAML
	dec := strictyaml.NewDecoder(data)
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the server is empty")
		}
		return nil, errors.New(strings.ReplaceAll(yamlTerms.Replace(err.Error()), "\n", " "))
	}
	known := false
	for _, st := range states {
		known = known || s.State == st
	}
	if !known {
		names := make([]string, len(states))
		for i, st := range states {
			names[i] = string(st)
		}
		return nil, fmt.Errorf("state %q: want one of %s", s.State, strings.Join(names, ", "))
	}
	srv := &backend.Server{Name: s.Name, ID: s.ID, State: s.State, Detail: s.Detail, Message: s.Message,
		Deleting: s.Deleting, Spec: backend.Spec{Image: s.Spec.Image, Disk: s.Disk != "", Restart: s.Spec.Restart}, Disk: s.Disk,
		Node: s.Node, NodeGone: s.NodeGone, NodeSilent: s.NodeSilent, IP: s.IP, Cordoned: s.Cordoned, Disruption: s.Disruption,
		Lingers: s.Lingers.on, KeptBy: s.Lingers.keptBy, TolerationsChanged: s.TolerationsChanged}
	if d := s.Disruption; d != nil && d.Reason == "" {
		return nil, errors.New("disruption: a reason is needed (for pods: the DisruptionTarget condition's, such as EvictionByEvictionAPI)")
	}
	if s.Spec.Placement != nil {
		raw, err := json.Marshal(s.Spec.Placement)
		if err != nil {
			return nil, fmt.Errorf("spec.placement: %w", err)
		}
		if srv.Spec.Placement, err = backend.ParsePlacement(raw); err != nil {
			return nil, fmt.Errorf("spec.placement: %w", err)
		}
	}
	if s.TolerationsChanged && len(s.AdmittedTolerations) > 0 {
		return nil, errors.New("admittedTolerations: a server whose tolerations were changed after it was made (tolerationsChanged) has none the backend counts as admission's")
	}
	if len(s.AdmittedTolerations) > 0 {
		// Read as the API server reads a pod's: JSON, a key a toleration does not have refused.
		raw, err := json.Marshal(s.AdmittedTolerations)
		if err != nil {
			return nil, fmt.Errorf("admittedTolerations: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&srv.AdmittedTolerations); err != nil {
			return nil, fmt.Errorf("admittedTolerations: not tolerations (key, operator, value, effect, tolerationSeconds): %w", err)
		}
	}
	for _, q := range []struct {
		name string
		dst  *resource.Quantity
		src  string
	}{{"cpu", &srv.Spec.CPU, s.Spec.CPU}, {"memory", &srv.Spec.Memory, s.Spec.Memory}, {"rootDisk", &srv.Spec.RootDisk, s.Spec.RootDisk}} {
		if q.src == "" && q.name == "rootDisk" && s.Disk != "" {
			continue // its root disk is the VM's disk
		}
		v, err := resource.ParseQuantity(q.src)
		if err != nil {
			return nil, fmt.Errorf("spec.%s %q: %w", q.name, q.src, err)
		}
		*q.dst = v
	}
	r, err := s.Resize.parse()
	if err != nil {
		return nil, err
	}
	srv.Resize = r
	if srv.Waiting, err = s.Waiting.parse(now); err != nil {
		return nil, err
	}
	if s.Since != "" {
		d, err := time.ParseDuration(s.Since)
		if err != nil {
			return nil, fmt.Errorf("since: %w", err)
		}
		srv.Since = now.Add(-d)
	}
	return srv, nil
}
