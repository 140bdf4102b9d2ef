package crds

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// Layout is a built-in field map chosen for a CRD of another group by its schema.
type Layout struct {
	Fields schema.Fields
	Of     k8sschema.GroupVersion // the version of this project's CRD whose map it is
	Why    string                 // why this one: a sentence for check's table and run's log
}

// ChooseLayout picks, for version of a CRD of another group, the built-in layout (one per
// shape: v1alpha1's, which v1beta1 shares, and v1's) whose every path its schema accepts, so
// that a CRD of the project's shape under another group needs no field-map file. A schema
// without some of a layout's optional fields (one copied from an earlier release of the
// project's CRD, before the root disk's class and status) gets that layout without them. It
// refuses when none fits (the paths that do not, per layout) and when more than one does (a
// schema that keeps unknown fields accepts any layout, so it cannot tell which one its
// objects use).
func ChooseLayout(crd []byte, version string) (Layout, error) {
	var fit []Layout
	var misses []string
	seen := map[schema.Fields]bool{}
	for _, v := range schema.BuiltinVersions() {
		gv := k8sschema.GroupVersion{Group: schema.Group, Version: v}
		f, err := schema.ForVersion(gv)
		if err != nil {
			return Layout{}, err
		}
		if seen[f] {
			continue // v1beta1 is v1alpha1's shape: tried once, named by the first
		}
		seen[f] = true
		n, errs := CheckSchema(crd, version, f)
		if len(errs) == 0 {
			fit = append(fit, Layout{Fields: f, Of: gv,
				Why: fmt.Sprintf("built-in layout of %s: the CRD's schema has every path (%d)", gv, n)})
			continue
		}
		if without, left, ok := withoutOptional(crd, version, f); ok {
			fit = append(fit, Layout{Fields: without, Of: gv,
				Why: fmt.Sprintf("built-in layout of %s without %s, which the CRD's schema lacks: it has every other path (%d)",
					gv, strings.Join(left, ", "), n-len(left))})
			continue
		}
		if n == 0 {
			return Layout{}, errors.Join(errs...) // no such version, or no schema at all
		}
		misses = append(misses, fmt.Sprintf("not %s's (%s)", gv, errs[0]))
	}
	switch len(fit) {
	case 1:
		if len(misses) > 0 {
			fit[0].Why += "; " + strings.Join(misses, "; ")
		}
		return fit[0], nil
	case 0:
		return Layout{}, fmt.Errorf("the schema of %s has no built-in layout: %s; give a field map with --schema-file", version, strings.Join(misses, "; "))
	}
	var names []string
	for _, l := range fit {
		names = append(names, l.Of.String())
	}
	return Layout{}, fmt.Errorf("the schema of %s accepts the layouts of %s alike (it keeps unknown fields), so it cannot say which its objects use; give a field map with --schema-file",
		version, strings.Join(names, " and "))
}

// withoutOptional is f without the optional fields the schema of version lacks, when every
// required field fits: the fields left out, by key, and whether such a layout fits. The disk's
// status goes as a whole (Fields.RootDiskClaim), or not at all.
func withoutOptional(crd []byte, version string, f schema.Fields) (schema.Fields, []string, bool) {
	_, errs := CheckSchema(crd, version, f)
	missing := map[string]bool{}
	for _, p := range f.Paths() {
		if p.Path == "" {
			continue
		}
		if _, e := CheckSchema(crd, version, f.Only(p.Key)); len(e) > 0 {
			if p.Required {
				return schema.Fields{}, nil, false
			}
			missing[p.Key] = true
		}
	}
	if len(missing) == 0 || len(errs) == 0 {
		return schema.Fields{}, nil, false
	}
	out, left := f.Without(missing)
	if _, e := CheckSchema(crd, version, out); len(e) > 0 {
		return schema.Fields{}, nil, false
	}
	return out, left, true
}

// LayoutChanged is the error of a CRD whose schema no longer chooses the layout a controller
// chose from it earlier: the schema was changed in place (an earlier release's copy upgraded
// to the current one, say) while the controller ran. Its fields are where the controller
// reads and writes every VM, so it cannot go on with the old layout: a field the new schema
// added (the disk's reclaim policy) would never be read, and what it says never done.
type LayoutChanged struct {
	CRD     string // the CRD's name
	Version string // the version whose layout changed
	Was     Layout // the layout chosen before
	Now     string // the layout the schema chooses now (its Why), or why it chooses none
}

// Error is one short line; Was.Why and Now, long, are for a log's attributes.
func (e *LayoutChanged) Error() string {
	return fmt.Sprintf("the schema of %s in CRD %s no longer gives the field map chosen from it", e.Version, e.CRD)
}

// Rechoose chooses again from crd, as JSON the way the API server returns it, the layout of
// version that l was chosen as: nil when ChooseLayout chooses the same fields, else a
// *LayoutChanged. Only the fields count, not the reason given for them: a change elsewhere in
// the schema (or in the status, the served flags, the labels) that leaves the choice as it
// was is no change. A schema that now has no layout, or more than one, is a change too: a
// controller started on it would refuse to run.
func (l Layout) Rechoose(crd []byte, version string) error {
	now, err := ChooseLayout(crd, version)
	if err == nil && now.Fields == l.Fields {
		return nil
	}
	e := &LayoutChanged{CRD: gjson.GetBytes(crd, "metadata.name").String(), Version: version, Was: l, Now: now.Why}
	if err != nil {
		e.Now = "no layout: " + err.Error()
	}
	return e
}
