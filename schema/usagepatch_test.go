package schema

import (
	"testing"

	"github.com/tidwall/gjson"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// TestUsagePatchRemovesUsage: a usage patch without usage (the metrics API gone) removes the
// usage's own parent object, as docs/usage.md says (the usage is removed from the status),
// rather than nulling its two fields and leaving usage: {} behind. Where the layout's two
// fields share no parent of their own (beside other fields, or with another field in it, or
// one of them left out of the layout), the fields go one by one and the rest stays.
func TestUsagePatchRemovesUsage(t *testing.T) {
	maps := fuzzMaps(t)
	v1alpha1 := maps["v1alpha1"]
	beside := v1alpha1
	beside.UsageCPU, beside.UsageMemory = "status.usedCores", "status.usedMemory"
	shared := v1alpha1
	shared.UsageCPU, shared.UsageMemory, shared.ServerNode = "status.server.stats.cpu", "status.server.stats.memory", "status.server.stats.node"
	one := v1alpha1
	one.UsageMemory = ""
	tests := map[string]struct {
		f     Fields
		patch string
		gone  string // the path the merged status no longer has
		stays string // a path it still has
	}{
		"v1alpha1":     {v1alpha1, `{"status":{"server":{"usage":null}}}`, "status.server.usage", "status.server.name"},
		"machine":      {maps["machine"], `{"status":{"instance":{"used":null}}}`, "status.instance.used", "status.instance.name"},
		"beside":       {beside, `{"status":{"usedCores":null,"usedMemory":null}}`, "status.usedCores", "status.phase"},
		"shared":       {shared, `{"status":{"server":{"stats":{"cpu":null,"memory":null}}}}`, "status.server.stats.cpu", "status.server.stats.node"},
		"memory unset": {one, `{"status":{"server":{"usage":{"cpu":null}}}}`, "status.server.usage.cpu", "status.server.name"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := UsagePatch(tc.f, nil, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.patch {
				t.Errorf("patch %s, want %s", got, tc.patch)
			}
			vm := withStatus(t, tc.f, patchStatuses()["active"], "1")
			if !gjson.GetBytes(vm.raw, tc.gone).Exists() {
				t.Fatalf("the VM has no %s to remove: %s", tc.gone, vm.raw)
			}
			merged, err := jsonpatch.MergePatch(vm.raw, got)
			if err != nil {
				t.Fatal(err)
			}
			if v := gjson.GetBytes(merged, tc.gone); v.Exists() {
				t.Errorf("%s is %s after the patch, want it gone", tc.gone, v.Raw)
			}
			if tc.f.UsageMemory != "" {
				if v := gjson.GetBytes(merged, tc.f.UsageMemory); v.Exists() {
					t.Errorf("%s is %s after the patch, want it gone", tc.f.UsageMemory, v.Raw)
				}
			}
			if !gjson.GetBytes(merged, tc.stays).Exists() {
				t.Errorf("%s went with the usage: %s", tc.stays, merged)
			}
			parsed, err := Parse(merged, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if s := parsed.Status().Server; s == nil || s.Usage != nil {
				t.Errorf("read back: server %+v, want one without usage", s)
			}
		})
	}
}

// TestStatusPatchWithoutServerRemovesUsage: a status without a server, under a layout whose
// server fields have no parent of their own but whose usage has (status.usage), removes that
// parent rather than leaving usage: {} behind.
func TestStatusPatchWithoutServerRemovesUsage(t *testing.T) {
	f := fuzzMaps(t)["v1alpha1"]
	f.ServerName, f.ServerID, f.ServerState, f.ServerNode, f.ServerIP = "status.serverName", "status.serverID", "status.serverState", "", ""
	f.UsageCPU, f.UsageMemory = "status.usage.cpu", "status.usage.memory"
	vm := withStatus(t, f, patchStatuses()["active"], "1")
	if !gjson.GetBytes(vm.raw, "status.usage.cpu").Exists() {
		t.Fatalf("the VM has no usage to remove: %s", vm.raw)
	}
	patch, err := StatusPatch(f, Status{Phase: PhaseInactive, Reason: "Stopped"}, "")
	if err != nil {
		t.Fatal(err)
	}
	merged, err := jsonpatch.MergePatch(vm.raw, patch)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"status.usage", "status.serverName"} {
		if v := gjson.GetBytes(merged, path); v.Exists() {
			t.Errorf("%s is %s after a status without a server, want it gone (patch %s)", path, v.Raw, patch)
		}
	}
}
