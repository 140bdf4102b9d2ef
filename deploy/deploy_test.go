package deploy

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cloudnative-czs/vm-controller/internal/golden"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/crds"
)

var vms = schema.GroupVersionResource{Group: "cloudnative.czs", Version: "v1alpha1", Resource: "virtualmachines"}

// TestRenderGolden pins the manifests for the deployments docs/deploying.md describes.
func TestRenderGolden(t *testing.T) {
	cases := map[string]Options{
		"default": {GVR: vms, Namespace: DefaultNamespace, Image: "vm-controller:v1", Replicas: 2, WatchNodes: true, WatchCRD: true, Usage: true, Disks: true},
		// One namespace, from a namespace of its own; no nodes, no CRD, no disks (their
		// StorageClasses are cluster-wide): nothing cluster-scoped but the watched Namespace.
		"namespaced": {GVR: vms, Namespace: DefaultNamespace, WatchNamespace: "vms", Image: "vm-controller:v1", Replicas: 2},
		"other-group": {GVR: schema.GroupVersionResource{Group: "compute.example.org", Version: "v1", Resource: "machines"},
			Namespace: "ops", WatchNamespace: "tenant-a", Image: "registry.example.org/vm-controller:v1", Replicas: 3, WatchNodes: true, WatchCRD: true, Usage: true, Disks: true,
			Args: []string{"--server-image=registry.example.org/server:2"}, FieldMap: []byte("# the field map of Machines\nspec: {}\n")},
		// One of several installs split by --selector (docs/several-installs.md): its own
		// namespace, which names its cluster-wide objects, and run given the selector.
		"selector": {GVR: vms, Namespace: "vm-controller-a", Selector: "shard=a", Image: "vm-controller:v1", Replicas: 2, WatchNodes: true, WatchCRD: true, Usage: true, Disks: true},
	}
	// The webhook form: the CRD with webhook conversion and the webhook's own objects.
	crd, err := crds.WithWebhook(crds.Webhook{Namespace: DefaultNamespace})
	if err != nil {
		t.Fatal(err)
	}
	wh := Webhook{Replicas: 2, Service: crds.WebhookService, Port: crds.WebhookPort, Secret: crds.WebhookService + "-tls", CRD: crds.DefaultName,
		ShutdownDelay: 5 * time.Second, ShutdownTimeout: 10 * time.Second}
	cases["webhook"] = Options{GVR: vms, Namespace: DefaultNamespace, Image: "vm-controller:v1", Replicas: 2, WatchNodes: true, WatchCRD: true, Usage: true, Disks: true,
		CRD: crd, Webhook: &wh}
	// An upgrade of an install whose CRD stores v1 (manifests --conversion webhook
	// --storage-version v1), with one webhook replica, which no disruption budget holds.
	crd, err = crds.WithWebhook(crds.Webhook{Namespace: "ops", StorageVersion: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	one := wh
	one.Replicas = 1
	cases["webhook-v1"] = Options{GVR: schema.GroupVersionResource{Group: vms.Group, Version: "v1", Resource: vms.Resource}, Namespace: "ops",
		Image: "vm-controller:v1", Replicas: 2, WatchNodes: true, WatchCRD: true, Usage: true, Disks: true, CRD: crd, Webhook: &one}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Render(o)
			if err != nil {
				t.Fatal(err)
			}
			// Every document parses as YAML with a kind: kubectl apply -f would take it.
			for i, doc := range bytes.Split(got, []byte("\n---\n")) {
				var m map[string]any
				if err := yaml.Unmarshal(doc, &m); err != nil || m["kind"] == nil {
					t.Fatalf("document %d is not an object: %v\n%s", i, err, doc)
				}
			}
			if strings.Contains(string(got), `"*"`) || strings.Contains(string(got), "- '*'") {
				t.Errorf("a wildcard in RBAC")
			}
			golden.Check(t, filepath.Join("..", "testdata", "manifests", name+".golden"), got)
		})
	}
}

// TestRenderRefusesTheWatchedNamespace: a controller installed in the namespace it watches
// is refused. Deleting that namespace deleted the controller's ServiceAccount and Lease first:
// the controller was refused, lost its Lease and exited before it removed the VMs'
// finalizers, and the namespace stayed Terminating.
func TestRenderRefusesTheWatchedNamespace(t *testing.T) {
	_, err := Render(Options{GVR: vms, Namespace: "vms", WatchNamespace: "vms", Image: "vm-controller:v1", Replicas: 2})
	if want := "the controller's namespace vms is the one it watches: install it in a namespace of its own"; err == nil || err.Error() != want {
		t.Errorf("Render = %v, want %q", err, want)
	}
}
