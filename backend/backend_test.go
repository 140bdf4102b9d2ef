package backend

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestServerSame: two servers are the same only when every field is, so that a field added to
// Server (or to Spec or Resize) and not to Same fails here instead of hiding changes of it. A
// quantity that renders another way (1Gi and 1073741824) is a change: it shows in the VM's
// status.
func TestServerSame(t *testing.T) {
	base := Server{Name: "s", ID: "id", State: StateReady, Detail: "Running", Message: "m",
		Spec:     Spec{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi"), RootDisk: resource.MustParse("10Gi"), Image: "img"},
		Deleting: false, Since: time.Unix(100, 0),
		Resize: Resize{State: ResizePending, Message: "r", CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")}}
	same := base
	if !base.Same(&same) {
		t.Fatal("a copy is not the same")
	}
	if (*Server)(nil).Same(nil) != true || base.Same(nil) || (*Server)(nil).Same(&base) {
		t.Error("nil handling")
	}

	// Change each leaf field in turn.
	var walk func(v reflect.Value, path string)
	n := 0
	walk = func(v reflect.Value, path string) {
		for i := range v.NumField() {
			f, name := v.Field(i), path+v.Type().Field(i).Name
			if f.Type() == reflect.TypeFor[resource.Quantity]() {
				n++
				old := f.Interface().(resource.Quantity)
				f.Set(reflect.ValueOf(resource.MustParse("3")))
				if base.Same(&same) {
					t.Errorf("%s changed, still the same", name)
				}
				f.Set(reflect.ValueOf(old))
				continue
			}
			switch f.Kind() {
			case reflect.Struct:
				if f.Type() == reflect.TypeFor[time.Time]() {
					n++
					f.Set(reflect.ValueOf(time.Unix(200, 0)))
					if base.Same(&same) {
						t.Errorf("%s changed, still the same", name)
					}
					f.Set(reflect.ValueOf(time.Unix(100, 0)))
					continue
				}
				walk(f, name+".")
			case reflect.String:
				n++
				old := f.String()
				f.SetString(old + "x")
				if base.Same(&same) {
					t.Errorf("%s changed, still the same", name)
				}
				f.SetString(old)
			case reflect.Bool:
				n++
				f.SetBool(!f.Bool())
				if base.Same(&same) {
					t.Errorf("%s changed, still the same", name)
				}
				f.SetBool(!f.Bool())
			default:
				t.Errorf("%s: a field of kind %s this test cannot change", name, f.Kind())
			}
		}
	}
	walk(reflect.ValueOf(&same).Elem(), "")
	if !base.Same(&same) {
		t.Fatal("the walk did not restore the copy")
	}
	if n != 15 {
		t.Errorf("walked %d fields, want 15", n)
	}

	bytes := base
	bytes.Spec.Memory = resource.MustParse("1073741824")
	if base.Same(&bytes) {
		t.Error("memory 1Gi and 1073741824: same")
	}
}
