// Package cluster gives the local cluster's Go programs what its configuration files say, read
// from those files, so that a value is written once: the resizer judges a memory decrease
// against the usage kwok reports, which usage.yaml sets.
package cluster

import (
	_ "embed"
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

//go:embed usage.yaml
var usageYAML []byte

// elseQuantity is the constant a usage expression ends in: what kwok reports for a pod
// without the annotation the expression asks about.
var elseQuantity = regexp.MustCompile(`:\s*Quantity\("([^"]+)"\)\s*$`)

// DefaultMemoryUsage is the memory usage kwok reports for a pod without the annotation
// kwok.x-k8s.io/usage-memory: the constant of usage.yaml's memory expression.
func DefaultMemoryUsage() (resource.Quantity, error) {
	return defaultMemoryUsage(usageYAML)
}

func defaultMemoryUsage(data []byte) (resource.Quantity, error) {
	var u struct {
		Spec struct {
			Usages []struct {
				Usage struct {
					Memory struct {
						Expression string `json:"expression"`
					} `json:"memory"`
				} `json:"usage"`
			} `json:"usages"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &u); err != nil {
		return resource.Quantity{}, fmt.Errorf("usage.yaml: %w", err)
	}
	if len(u.Spec.Usages) != 1 {
		return resource.Quantity{}, fmt.Errorf("usage.yaml: %d usages, want one, for every pod", len(u.Spec.Usages))
	}
	expr := u.Spec.Usages[0].Usage.Memory.Expression
	m := elseQuantity.FindStringSubmatch(expr)
	if m == nil {
		return resource.Quantity{}, fmt.Errorf("usage.yaml: the memory expression %q does not end in : Quantity(\"...\")", expr)
	}
	q, err := resource.ParseQuantity(m[1])
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("usage.yaml: the memory expression's default: %w", err)
	}
	return q, nil
}
