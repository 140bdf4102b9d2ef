package command

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestMigratePausedNamesTheVMsGroup: migrate refuses a paused VM with the command that resumes
// it, naming the VM as the controller's Paused condition does: by the group the plugin read it
// at and its namespace, so that the command reaches it with the plugin told another group
// (--api-version example.com/v2), where `vm` is not its resource, as well as with the defaults.
func TestMigratePausedNamesTheVMsGroup(t *testing.T) {
	f, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	for apiVersion, want := range map[string]string{
		schema.Group + "/v1": "resume it first: kubectl annotate virtualmachine." + schema.Group + "/vm1 -n ns " + schema.AnnotationPaused + "-",
		"example.com/v2":     "resume it first: kubectl annotate virtualmachine.example.com/vm1 -n ns " + schema.AnnotationPaused + "-",
	} {
		t.Run(apiVersion, func(t *testing.T) {
			raw, _ := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": "VirtualMachine",
				"metadata": map[string]any{"name": "vm1", "namespace": "ns", "annotations": map[string]any{schema.AnnotationPaused: "true"}},
				"spec":     map[string]any{"runStrategy": "Always", "resources": map[string]any{"requests": map[string]any{"cpu": 1, "memory": "1Gi"}}, "rootDisk": map[string]any{"size": "1Gi"}},
				"status":   map[string]any{"phase": "Active", "reason": "ServerReady", "server": map[string]any{"name": "vm1-server", "id": "pod-uid", "state": "Running"}}})
			vm := schema.ViewOf(raw, "1", f)
			_, err := (&vmClient{namespace: "ns"}).migrationSource(context.Background(), vm, nil)
			var ec cli.ExitCoder
			if !errors.As(err, &ec) || ec.ExitCode() != 1 || !strings.Contains(err.Error(), "is paused") || !strings.HasSuffix(err.Error(), want) {
				t.Errorf("migrate of a paused VM: %v\nwant a refusal, exit 1, ending %q", err, want)
			}
		})
	}
}
