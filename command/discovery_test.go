package command

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// newGroupServer is a fake API server that holds the CRD def of gvr's group and resource and
// serves its group as an API server does: /apis/GROUP lists the versions the CRD serves, and
// /apis/GROUP/VERSION answers for each of them (404 for any other).
func newGroupServer(t *testing.T, gvr k8sschema.GroupVersionResource, def []byte) *fakeAPIServer {
	t.Helper()
	var served []string
	for _, v := range gjson.GetBytes(def, "spec.versions").Array() {
		if v.Get("served").Bool() {
			served = append(served, v.Get("name").String())
		}
	}
	s := &fakeAPIServer{gvr: gvr, crd: def, classes: map[string]bool{"standard": true}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/apis/"+gvr.Group && len(served) > 0:
			var versions []map[string]string
			for _, v := range served {
				versions = append(versions, map[string]string{"groupVersion": gvr.Group + "/" + v, "version": v})
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"kind": "APIGroup", "apiVersion": "v1", "name": gvr.Group,
				"versions": versions, "preferredVersion": versions[0]})
		case strings.HasPrefix(r.URL.Path, "/apis/"+gvr.Group+"/"):
			version := strings.TrimPrefix(r.URL.Path, "/apis/"+gvr.Group+"/")
			for _, v := range served {
				if v == version {
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"%s/%s","resources":[{"name":%q,"namespaced":true,"kind":"VirtualMachine","verbs":["get","list","watch","patch"]}]}`,
						gvr.Group, v, gvr.Resource)
					return
				}
			}
			notFound(w, k8sschema.GroupResource{Resource: r.URL.Path}, "")
		default:
			s.serve(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// withServed is the CRD def with version's served set to served.
func withServed(t *testing.T, def []byte, version string, served bool) []byte {
	t.Helper()
	var crd map[string]any
	if err := json.Unmarshal(def, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd["spec"].(map[string]any)["versions"].([]any) {
		if v := v.(map[string]any); v["name"] == version {
			v["served"] = served
		}
	}
	out, err := json.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDiscoveryOfAVersionNotServed: when the cluster serves the resource's group but not its
// version, the discovery check names the versions it serves and what would serve this one,
// instead of asking for the CRD to be installed (it is): v1 of this project's CRD is only in
// its form with webhook conversion; a version with served: false is to be set served. The
// CRD says which, when it is read anyway (--watch-crd); without it, the check says both. A
// group not served at all still asks for the CRD.
func TestDiscoveryOfAVersionNotServed(t *testing.T) {
	own := func(version string) k8sschema.GroupVersionResource {
		return k8sschema.GroupVersionResource{Group: ownGVR.Group, Version: version, Resource: ownGVR.Resource}
	}
	absent := k8sschema.GroupVersionResource{Group: "absent.example.org", Version: "v1", Resource: "virtualmachines"}
	machineMap := filepath.Join("..", "testdata", "machines", "fieldmap.yaml")
	tests := map[string]struct {
		gvr        k8sschema.GroupVersionResource
		crd        func(t *testing.T) []byte // nil: none
		schemaFile string
		watchCRD   bool
		want       string // the discovery row's detail, HOST for the server's address
	}{
		"v1 on the plain CRD": {gvr: own("v1"), crd: plainCRD, watchCRD: true,
			want: "the cluster at HOST serves cloudnative.czs in v1alpha1, v1beta1, not v1: CRD virtualmachines.cloudnative.czs is in its plain form, without v1, which only its form with webhook conversion has: run the webhook and apply that form (vm-controller crds --conversion webhook --namespace NS | kubectl apply -f -; docs/versions.md), or give --api-version cloudnative.czs/v1alpha1"},
		"v1 on the plain CRD, --watch-crd=false": {gvr: own("v1"), crd: plainCRD,
			want: "the cluster at HOST serves cloudnative.czs in v1alpha1, v1beta1, not v1: v1 is only in the form of CRD virtualmachines.cloudnative.czs with webhook conversion (unless that form is applied with v1 served: false): run the webhook and apply that form (vm-controller crds --conversion webhook --namespace NS | kubectl apply -f -; docs/versions.md), or give --api-version cloudnative.czs/v1alpha1"},
		"a version with served: false": {gvr: own("v1beta1"), crd: func(t *testing.T) []byte { return withServed(t, plainCRD(t), "v1beta1", false) }, watchCRD: true,
			want: "the cluster at HOST serves cloudnative.czs in v1alpha1, not v1beta1: CRD virtualmachines.cloudnative.czs has v1beta1 with served: false: set it served: true (kubectl edit crd virtualmachines.cloudnative.czs), or give --api-version cloudnative.czs/v1alpha1"},
		"a version with served: false, --watch-crd=false": {gvr: own("v1beta1"), crd: func(t *testing.T) []byte { return withServed(t, plainCRD(t), "v1beta1", false) },
			want: "the cluster at HOST serves cloudnative.czs in v1alpha1, not v1beta1: CRD virtualmachines.cloudnative.czs has no version v1beta1, or sets it served: false: give --api-version cloudnative.czs/v1alpha1, or serve v1beta1 in the CRD"},
		"another group, a version it lacks": {gvr: k8sschema.GroupVersionResource{Group: noStatusGVR.Group, Version: "v2", Resource: noStatusGVR.Resource},
			crd: func(t *testing.T) []byte { return establishedCRD(t, noStatusCRDFile) }, schemaFile: machineMap, watchCRD: true,
			want: "the cluster at HOST serves nostatus.example.org in v1alpha1, v1beta1, not v2: CRD virtualmachines.nostatus.example.org has no version v2: give --api-version nostatus.example.org/v1alpha1, or add v2 to the CRD"},
		"a group not served": {gvr: absent, schemaFile: machineMap, watchCRD: true,
			want: "the cluster at HOST does not serve absent.example.org/v1: install the CRD first (vm-controller crds | kubectl apply -f -)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var def []byte
			if tc.crd != nil {
				def = tc.crd(t)
			}
			srv := newGroupServer(t, tc.gvr, def)
			cfg := checked(&rest.Config{Host: srv.URL})
			limitQPS(cfg, 50, 100) // as check does
			cl, err := newAPIClients(cfg)
			if err != nil {
				t.Fatal(err)
			}
			f, err := gather(context.Background(), cl, cfg.Host, target{gvr: tc.gvr, schemaFile: tc.schemaFile, watchCRD: tc.watchCRD})
			if err != nil {
				t.Fatal(err)
			}
			var disc checkResult
			for _, r := range f.checks {
				if r.name == "discovery" {
					disc = r
				}
			}
			want := strings.ReplaceAll(tc.want, "HOST", srv.URL)
			if !disc.failed() || disc.detail != want {
				t.Errorf("discovery %s: %s\nwant FAIL: %s", disc.result(), disc.detail, want)
			}
			if reads := srv.crdReads(); !tc.watchCRD && reads > 0 {
				t.Errorf("with --watch-crd=false the CRD was read %d times", reads)
			}
		})
	}
}

// plainCRD is this project's CRD as `vm-controller crds` prints it, Established.
func plainCRD(t *testing.T) []byte { return establishedCRD(t, ownCRDFile) }
