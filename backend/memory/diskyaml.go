package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/strictyaml"
)

// diskYAML is how a person writes down a disk the backend observed: in the golden cases of
// the decision (testdata/decide/claim) and for the plan command's --disk.
type diskYAML struct {
	Name         string            `yaml:"name"`
	ID           string            `yaml:"id"`
	Version      string            `yaml:"version"`
	Phase        backend.DiskPhase `yaml:"phase"`
	Requested    string            `yaml:"requested"`
	Capacity     string            `yaml:"capacity"`
	StorageClass string            `yaml:"storageClass"`
	CanGrow      *bool             `yaml:"canGrow"`
	// BindsWithServer: it is bound only once a server that mounts it is placed
	// (WaitForFirstConsumer).
	BindsWithServer bool              `yaml:"bindsWithServer"`
	Growth          backend.Growth    `yaml:"growth"`
	Owner           backend.DiskOwner `yaml:"owner"`
	KeptMark        bool              `yaml:"keptMark"`       // marked as kept (backend.Disk.KeptMark)
	KindUnrecorded  bool              `yaml:"kindUnrecorded"` // the VM's own, not recording its kind (backend.Disk.KindUnrecorded)
	Pending         string            `yaml:"pending"`
	Deleting        bool              `yaml:"deleting"`
	Pinned          string            `yaml:"pinned"` // how the disk is bound to some nodes, if it is
	// The nodes its storage can be reached from, as a PersistentVolume's spec.nodeAffinity
	// writes them ({required: {nodeSelectorTerms: [...]}}; backend.Disk.NodeAffinity).
	NodeAffinity map[string]any `yaml:"nodeAffinity"`
}

// diskTerms rewrites yaml.v3's messages, which name Go types, in the terms of the file.
var diskTerms = strings.NewReplacer(
	"yaml: unmarshal errors:\n  ", "", "\n  ", "; ", "yaml: ", "",
	" not found in type memory.diskYAML", " is not a key of a disk (name, id, version, phase, requested, capacity, storageClass, canGrow, bindsWithServer, growth, owner, keptMark, kindUnrecorded, pending, deleting, pinned, nodeAffinity)",
	" into memory.diskYAML", " into a disk (want a mapping)",
	" not found in type backend.Growth", " is not a key of a disk's growth (state, message)",
	" into backend.Growth", " into a disk's growth (want a mapping)",
)

// The words a written-down disk may use.
var (
	diskPhases   = []backend.DiskPhase{backend.DiskPending, backend.DiskBound, backend.DiskLost}
	diskOwners   = []backend.DiskOwner{backend.DiskOwned, backend.DiskKept, backend.DiskUnowned, backend.DiskOther}
	growthStates = []backend.GrowthState{backend.GrowthNone, backend.GrowthPending, backend.GrowthInProgress, backend.GrowthInfeasible}
)

// ParseDisk reads a disk written down as YAML:
//
//	name: test-vm-rootdisk
//	id: disk-uid-1
//	version: "7"           # optional
//	phase: Bound           # Pending, Bound or Lost
//	requested: 40G         # the size asked for
//	capacity: 40G          # the size it has; empty until Bound
//	storageClass: standard # optional
//	canGrow: true          # optional, default true: its class lets it grow
//	bindsWithServer: false # optional: bound only once a server that mounts it is placed
//	growth: {state: InProgress, message: ""}  # optional: Pending, InProgress or Infeasible
//	owner: Owned           # Owned, Kept, Unowned or Other (default Owned)
//	keptMark: false        # marked as kept (for claims: the annotation cloudnative.czs/kept)
//	kindUnrecorded: false  # the VM's own, not recording its kind (for claims: no cloudnative.czs/owner-kind)
//	pending: ""            # why it is not bound, as the binder said
//	deleting: false
//	pinned: ""             # how it is bound to its node, when a migration would be refused for it
//	nodeAffinity:          # the nodes its storage can be reached from, as its volume's spec.nodeAffinity
//	  required: {nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [a]}]}]}
//
// Unknown keys, unknown words and malformed quantities are errors.
func ParseDisk(data []byte) (*backend.Disk, error) {
	var in diskYAML
	dec := strictyaml.NewDecoder(data)
	if err := dec.Decode(&in); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the disk is empty")
		}
		return nil, errors.New(strings.ReplaceAll(diskTerms.Replace(err.Error()), "\n", " "))
	}
	if in.Owner == "" {
		in.Owner = backend.DiskOwned
	}
	if err := oneOf("phase", in.Phase, diskPhases); err != nil {
		return nil, err
	}
	if err := oneOf("owner", in.Owner, diskOwners); err != nil {
		return nil, err
	}
	if err := oneOf("growth.state", in.Growth.State, growthStates); err != nil {
		return nil, err
	}
	d := &backend.Disk{Name: in.Name, ID: in.ID, Version: in.Version, Phase: in.Phase, StorageClass: in.StorageClass, Pinned: in.Pinned,
		CanGrow: in.CanGrow == nil || *in.CanGrow, BindsWithServer: in.BindsWithServer, Growth: in.Growth, Owner: in.Owner, KeptMark: in.KeptMark,
		KindUnrecorded: in.KindUnrecorded, Pending: in.Pending, Deleting: in.Deleting}
	if in.NodeAffinity != nil {
		var err error
		if d.NodeAffinity, err = parseNodeAffinity(in.NodeAffinity); err != nil {
			return nil, err
		}
	}
	for _, q := range []struct {
		name string
		dst  *resource.Quantity
		src  string
	}{{"requested", &d.Requested, in.Requested}, {"capacity", &d.Capacity, in.Capacity}} {
		if q.src == "" && q.name == "capacity" {
			continue
		}
		v, err := resource.ParseQuantity(q.src)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", q.name, q.src, err)
		}
		*q.dst = v
	}
	return d, nil
}

// oneOf checks that v is one of the known words.
func oneOf[T ~string](key string, v T, known []T) error {
	if slices.Contains(known, v) {
		return nil
	}
	names := make([]string, 0, len(known))
	for _, k := range known {
		if k != "" {
			names = append(names, string(k))
		}
	}
	return fmt.Errorf("%s %q: want one of %s", key, v, strings.Join(names, ", "))
}

// parseNodeAffinity reads a volume's node affinity as the API server reads a
// PersistentVolume's (JSON, a key it does not have refused) and returns its required node
// selector, which it must have.
func parseNodeAffinity(in map[string]any) (*corev1.NodeSelector, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("nodeAffinity: %w", err)
	}
	var na corev1.VolumeNodeAffinity
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&na); err != nil {
		return nil, fmt.Errorf("nodeAffinity: not a volume's node affinity ({required: {nodeSelectorTerms: [...]}}): %w", err)
	}
	if na.Required == nil {
		return nil, errors.New("nodeAffinity: want required, the node selector the volume's nodes match")
	}
	return na.Required, nil
}
