package schema

import (
	"strings"
	"testing"
)

// underPlacement reports whether an error's field is the placement or one of its parts.
func underPlacement(f Fields, field string) bool {
	return f.Placement != "" && (field == f.Placement || strings.HasPrefix(field, f.Placement+".") || strings.HasPrefix(field, f.Placement+"["))
}

// TestPlacement: what the decision can tell of a placement without the cluster, error by
// error, and what it accepts.
func TestPlacement(t *testing.T) {
	tests := map[string]struct {
		json string // spec.placement
		want string // the canonical placement accepted; "" for none
		errs []string
	}{
		"absent":       {json: ``},
		"null":         {json: `null`},
		"empty":        {json: `{}`},
		"empty fields": {json: `{"nodeSelector": {}, "tolerations": [], "affinity": {}}`},
		"every field": {
			json: `{"nodeSelector": {"disktype": "ssd"}, "priorityClassName": "vm-high",
				"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "vms", "effect": "NoExecute", "tolerationSeconds": 30}],
				"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
				"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}]}}}`,
			want: `{"nodeSelector":{"disktype":"ssd"},"affinity":{"nodeAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":5,"preference":{"matchExpressions":[{"key":"a","operator":"Exists"}]}}]}},"tolerations":[{"key":"dedicated","operator":"Equal","value":"vms","effect":"NoExecute","tolerationSeconds":30}],"priorityClassName":"vm-high","topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule"}]}`,
		},
		"tolerate everything": {json: `{"tolerations": [{"operator": "Exists"}]}`, want: `{"tolerations":[{"operator":"Exists"}]}`},
		"not an object":       {json: `["ssd"]`, errs: []string{"spec.placement: Invalid value"}},
		"unknown key":         {json: `{"nodeName": "node-a"}`, errs: []string{`unknown field "nodeName"`}},
		"wrong type":          {json: `{"nodeSelector": ["ssd"]}`, errs: []string{"not a placement"}},
		"bad selector":        {json: `{"nodeSelector": {"a b": "c d"}}`, errs: []string{"spec.placement.nodeSelector[a b]"}},
		"empty key, Equal":    {json: `{"tolerations": [{"value": "x"}]}`, errs: []string{"spec.placement.tolerations[0].operator: Invalid value"}},
		"Exists with value":   {json: `{"tolerations": [{"key": "k", "operator": "Exists", "value": "x"}]}`, errs: []string{"tolerations[0].value"}},
		"seconds without NoExecute": {json: `{"tolerations": [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]}`,
			errs: []string{"tolerations[0].tolerationSeconds"}},
		"no terms": {json: `{"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}}`,
			errs: []string{"nodeSelectorTerms: Required value"}},
		"In without values": {json: `{"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In"}]}]}}}}`,
			errs: []string{"matchExpressions[0].values: Required value"}},
		"integer and node name": {json: `{"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "example.com/cores", "operator": "Gt", "values": ["4"]}], "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-a"]}]}]}}}}`,
			want: `{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"example.com/cores","operator":"Gt","values":["4"]}],"matchFields":[{"key":"metadata.name","operator":"NotIn","values":["node-a"]}]}]}}}}`},
		"term key not a label key": {json: `{"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "bad key!", "operator": "Exists"}]}]}}}}`,
			errs: []string{"nodeSelectorTerms[0].matchExpressions[0].key: Invalid value"}},
		"In value not a label value": {json: `{"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["ok", "not ok"]}]}]}}}}`,
			errs: []string{`nodeSelectorTerms[0].matchExpressions[0].values[1]: Invalid value: "not ok": not a label value`}},
		// What the API server lets through is a term the scheduler skips, which another term
		// may make up for: not refused.
		"preferred value not a label value": {json: `{"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchExpressions": [{"key": "k", "operator": "In", "values": ["not ok"]}]}}]}}}`,
			want: `{"affinity":{"nodeAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"preference":{"matchExpressions":[{"key":"k","operator":"In","values":["not ok"]}]}}]}}}`},
		"Gt not an integer": {json: `{"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["ten"]}]}, {"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}}}}`,
			want: `{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"k","operator":"Gt","values":["ten"]}]},{"matchExpressions":[{"key":"k","operator":"Exists"}]}]}}}}`},
		"Lt not a label value": {json: `{"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Lt", "values": ["-5"]}]}]}}}}`,
			errs: []string{`matchExpressions[0].values[0]: Invalid value: "-5": not a label value`}},
		"field key not metadata.name": {json: `{"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.labels", "operator": "In", "values": ["a"]}]}]}}}}`,
			errs: []string{`matchFields[0].key: Unsupported value: "metadata.labels"`}},
		"field operator Exists": {json: `{"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}]}}}}`,
			errs: []string{`matchFields[0].operator: Unsupported value: "Exists"`}},
		"field with two values": {json: `{"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a", "node-b"]}]}]}}}}`,
			errs: []string{"matchFields[0].values: Invalid value"}},
		"field value not a node name": {json: `{"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["Node_A"]}]}]}}}}`,
			errs: []string{`matchFields[0].values[0]: Invalid value: "Node_A": not a node name`}},
		"weight":        {json: `{"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}]}}}`, errs: []string{"weight"}},
		"spread":        {json: `{"topologySpreadConstraints": [{"maxSkew": 0, "whenUnsatisfiable": "Never"}]}`, errs: []string{"maxSkew", "topologyKey", "whenUnsatisfiable"}},
		"priority name": {json: `{"priorityClassName": "High!"}`, errs: []string{"priorityClassName"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			raw := `{"spec": {"action": "active", "resource": {"cpu": 1, "memory": "1Gi", "rootDisk": "1Gi"}}}`
			if tc.json != "" {
				raw = `{"spec": {"action": "active", "resource": {"cpu": 1, "memory": "1Gi", "rootDisk": "1Gi"}, "placement": ` + tc.json + `}}`
			}
			vm, err := Parse([]byte(raw), builtin(t, "v1alpha1"))
			if err != nil {
				t.Fatal(err)
			}
			spec, errs := vm.Spec()
			if len(errs) != len(tc.errs) {
				t.Fatalf("errors %v, want %d containing %q", errs, len(tc.errs), tc.errs)
			}
			for i, want := range tc.errs {
				if !strings.Contains(errs[i].Error(), want) {
					t.Errorf("error %d %q, want it to contain %q", i, errs[i].Error(), want)
				}
			}
			if got := spec.Placement.Canonical(); len(errs) == 0 && got != tc.want {
				t.Errorf("placement %s, want %s", got, tc.want)
			}
		})
	}
}
