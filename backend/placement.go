package backend

import (
	"bytes"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Placement says where a server may run, in Kubernetes' own shapes (those of a pod's spec),
// so that a user writes what they already know and a pod carries it as it is. A backend
// outside the cluster maps what it can of it (a node selector to a host aggregate, say) and
// refuses the rest with ErrRejected.
//
// The decision compares placements by their canonical JSON (Canonical): nil, empty lists and
// empty maps are all "no placement".
type Placement struct {
	NodeSelector              map[string]string                 `json:"nodeSelector,omitempty"`
	Affinity                  *corev1.Affinity                  `json:"affinity,omitempty"`
	Tolerations               []corev1.Toleration               `json:"tolerations,omitempty"`
	PriorityClassName         string                            `json:"priorityClassName,omitempty"`
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
}

// Canonical is p as JSON with its keys in a fixed order, "" when p says nothing: the form a
// pod carries in an annotation and the one two placements are compared by.
func (p *Placement) Canonical() string {
	if p == nil {
		return ""
	}
	raw, err := json.Marshal(p)
	if err != nil || string(raw) == "{}" {
		return "" // a Placement always marshals: its fields are plain data
	}
	if p.Affinity != nil && *p.Affinity == (corev1.Affinity{}) {
		// An empty affinity says nothing: drop it, as the other empty fields are.
		q := *p
		q.Affinity = nil
		return q.Canonical()
	}
	return string(raw)
}

// Empty reports whether p says nothing about where the server runs.
func (p *Placement) Empty() bool { return p.Canonical() == "" }

// SamePlacement reports whether two placements say the same.
func SamePlacement(a, b *Placement) bool { return a.Canonical() == b.Canonical() }

// ParsePlacement reads a placement written as JSON, refusing keys it does not know (a field
// of a pod's spec that is not a placement, a misspelt one) rather than dropping them.
func ParsePlacement(raw []byte) (*Placement, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var p Placement
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("read placement: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("read placement: more than one JSON value")
	}
	return &p, nil
}

// MarshalYAML renders the placement in plans and golden files as its JSON reads, keys sorted.
func (p *Placement) MarshalYAML() (any, error) {
	c := p.Canonical()
	if c == "" {
		return nil, nil
	}
	var out any
	if err := json.Unmarshal([]byte(c), &out); err != nil {
		return nil, fmt.Errorf("render placement: %w", err)
	}
	return out, nil
}
