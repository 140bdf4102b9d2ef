package memory

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestParseServerLingers: a written-down server's lingers is true, false, or the names of what
// keeps the ended server running (backend.Server.KeptBy), which say that it lingers too; an
// empty list is a server that does not linger, and anything else is an error that says what
// the key takes.
func TestParseServerLingers(t *testing.T) {
	const base = "name: a-server\nid: pod-1\nstate: Stopped\ndetail: Running\nspec: {cpu: \"1\", memory: 1G, rootDisk: 1G, image: i}\n"
	for name, tc := range map[string]struct {
		lingers string // the key's line; "": none
		want    bool
		keptBy  []string
	}{
		"none":   {},
		"true":   {lingers: "lingers: true", want: true},
		"false":  {lingers: "lingers: false"},
		"named":  {lingers: "lingers: [istio-proxy, log-agent]", want: true, keptBy: []string{"istio-proxy", "log-agent"}},
		"empty":  {lingers: "lingers: []"},
		"a list": {lingers: "lingers:\n- istio-proxy", want: true, keptBy: []string{"istio-proxy"}},
		// In the pods backend's order, by name, each once.
		"named in another order": {lingers: "lingers: [log-agent, istio-proxy, log-agent]", want: true, keptBy: []string{"istio-proxy", "log-agent"}},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := ParseServer([]byte(base+tc.lingers+"\n"), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if s.Lingers != tc.want || !slices.Equal(s.KeptBy, tc.keptBy) {
				t.Errorf("lingers %v, kept by %q; want %v, %q", s.Lingers, s.KeptBy, tc.want, tc.keptBy)
			}
		})
	}
	for _, bad := range []string{"lingers: {by: istio-proxy}", "lingers: sometimes", "lingers: [[a]]", `lingers: [istio-proxy, ""]`} {
		if _, err := ParseServer([]byte(base+bad+"\n"), time.Now()); err == nil || !strings.Contains(err.Error(), "lingers: want true, false, or the names") {
			t.Errorf("ParseServer with %q: %v, want an error that says what lingers takes", bad, err)
		}
	}
}

// TestParseServerAdmittedTolerations: a written-down server's admittedTolerations are read as
// a placement's tolerations are; a key a toleration does not have is an error that names it.
func TestParseServerAdmittedTolerations(t *testing.T) {
	const base = "name: a-server\nid: pod-1\nstate: Ready\ndetail: Running\nspec: {cpu: \"1\", memory: 1G, rootDisk: 1G, image: i}\n"
	s, err := ParseServer([]byte(base+"admittedTolerations: [{key: team, operator: Equal, value: a, effect: NoSchedule}, {key: gpu, operator: Exists}]\n"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.Toleration{{Key: "team", Operator: corev1.TolerationOpEqual, Value: "a", Effect: corev1.TaintEffectNoSchedule},
		{Key: "gpu", Operator: corev1.TolerationOpExists}}
	if !reflect.DeepEqual(s.AdmittedTolerations, want) {
		t.Errorf("admitted %+v, want %+v", s.AdmittedTolerations, want)
	}
	if s, err := ParseServer([]byte(base), time.Now()); err != nil {
		t.Errorf("without the key: %v", err)
	} else if s.AdmittedTolerations != nil {
		t.Errorf("without the key: %+v; want none", s.AdmittedTolerations)
	}
	if _, err := ParseServer([]byte(base+"admittedTolerations: [{key: team, colour: blue}]\n"), time.Now()); err == nil ||
		!strings.Contains(err.Error(), "admittedTolerations") || !strings.Contains(err.Error(), "colour") {
		t.Errorf("an unknown key: %v, want an error that names admittedTolerations and the key", err)
	}
}

// TestParseServerTolerationsChanged: tolerationsChanged says the server's tolerations were
// changed after it was made; with admittedTolerations beside it, which the backend never gives
// such a server, it is an error that names both.
func TestParseServerTolerationsChanged(t *testing.T) {
	const base = "name: a-server\nid: pod-1\nstate: Ready\ndetail: Running\nspec: {cpu: \"1\", memory: 1G, rootDisk: 1G, image: i}\n"
	s, err := ParseServer([]byte(base+"tolerationsChanged: true\n"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !s.TolerationsChanged || s.AdmittedTolerations != nil {
		t.Errorf("changed %v, admitted %+v; want changed, none admitted", s.TolerationsChanged, s.AdmittedTolerations)
	}
	if s, err := ParseServer([]byte(base), time.Now()); err != nil || s.TolerationsChanged {
		t.Errorf("without the key: %v, changed %v; want unchanged", err, s != nil && s.TolerationsChanged)
	}
	_, err = ParseServer([]byte(base+"tolerationsChanged: true\nadmittedTolerations: [{key: team, operator: Exists}]\n"), time.Now())
	if err == nil || !strings.Contains(err.Error(), "admittedTolerations") || !strings.Contains(err.Error(), "tolerationsChanged") {
		t.Errorf("both: %v, want an error that names both", err)
	}
}
