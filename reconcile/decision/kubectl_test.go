package decision

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/restmapper"

	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// refNow is the clock of TestHintsNameTheVMsGroup.
var refNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// TestHintsNameTheVMsGroup: the commands that a RestartRequired, Paused and NotStarted
// message gives reach the VM they are about when the controller runs at another group
// (--api-version example.com/v2, its CRD a copy of this project's): they name its type by that
// group and its namespace, never `vm`, which is this project's CRD's short name (or KubeVirt's);
// and the plugin's command carries --api-version, as the plugin's defaults are this project's
// group.
func TestHintsNameTheVMsGroup(t *testing.T) {
	const ref = "virtualmachine.example.com/db -n prod "
	vm := func(t *testing.T, patch string) schema.VirtualMachine {
		t.Helper()
		raw := `{"apiVersion":"example.com/v2","kind":"VirtualMachine","metadata":{"name":"db","namespace":"prod","uid":"u1",` +
			`"resourceVersion":"7","generation":2,"finalizers":["` + schema.Finalizer + `"]` + patch
		v, err := schema.Parse([]byte(raw), builtin("v1alpha1")(t))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	srv, err := memory.ParseServer([]byte("name: db-server\nid: pod-uid-1\nstate: Ready\ndetail: Running\n"+
		"spec: {cpu: \"2\", memory: 4G, rootDisk: 40G, image: registry.k8s.io/pause:3.10}\n"), refNow)
	if err != nil {
		t.Fatal(err)
	}
	const running = `"status":{"phase":"Active","reason":"ServerReady","observedGeneration":1,"server":{"name":"db-server","id":"pod-uid-1","state":"Running"}}}`
	manual := DefaultPolicy
	manual.Resize, manual.RootDisk = ResizeManual, RootDiskEphemeral
	tests := map[string]struct {
		policy  Policy
		in      Input
		message func(Plan) string // the message that gives the command
		want    []string
	}{
		"RestartRequired": {policy: manual,
			in: Input{VM: vm(t, `},"spec":{"action":"active","resource":{"cpu":2,"memory":"4G","rootDisk":"80G"}},`+running), Server: srv},
			message: func(p Plan) string {
				if c := p.Status.Condition(schema.ConditionRestartRequired); c != nil {
					return c.Message
				}
				return ""
			},
			want: []string{"restart it with: kubectl annotate " + ref + schema.AnnotationRestartedAt + "="}},
		"Paused": {policy: manual,
			in: Input{VM: vm(t, `,"annotations":{"`+schema.AnnotationPaused+`":"true"}},"spec":{"action":"active","resource":{"cpu":2,"memory":"4G","rootDisk":"40G"}},`+running),
				Server: srv},
			message: func(p Plan) string {
				if c := p.Status.Condition(schema.ConditionPaused); c != nil {
					return c.Message
				}
				return ""
			},
			want: []string{"resume with: kubectl annotate " + ref + schema.AnnotationPaused + "-"}},
		"NotStarted": {policy: manual,
			in:      Input{VM: vm(t, `},"spec":{"action":"manual","resource":{"cpu":2,"memory":"4G","rootDisk":"40G"}}}`)},
			message: func(p Plan) string { return p.Status.Message },
			want: []string{"kubectl vm start db -n prod --api-version example.com/v2 --resource PLURAL --schema-file FIELDMAP",
				"kubectl annotate " + ref + schema.AnnotationStartRequestedAt + "="}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.in.Now = refNow
			p := tc.policy.Decide(tc.in)
			if p.Status == nil {
				t.Fatalf("no status: %+v", p)
			}
			msg := tc.message(p)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q\nwant it to say %q", msg, w)
				}
			}
			if strings.Contains(msg, " vm db") || strings.Contains(msg, "cloudnative.czs/db") {
				t.Errorf("message %q names the VM by this project's short name or group", msg)
			}
			for _, e := range p.Events {
				if e.Message != msg && strings.Contains(e.Message, "kubectl") {
					t.Errorf("event %s says %q, not the message %q", e.Reason, e.Message, msg)
				}
			}
		})
	}
}

// TestKubectlRefResolves: the TYPE of kubectlRef reaches, as kubectl resolves it, the VM's
// own resource among several that a cluster may serve under the kind VirtualMachine (this
// project's, KubeVirt's, a copy under another group whose CRD names another singular, which
// kubectl then finds by the kind), and the VM's version when asked for it; `vm`, the short
// name of two of them, would not tell them apart.
func TestKubectlRefResolves(t *testing.T) {
	resource := func(plural, singular, kind string, short ...string) metav1.APIResource {
		return metav1.APIResource{Name: plural, SingularName: singular, Kind: kind, Namespaced: true, ShortNames: short}
	}
	group := func(name string, versions []string, r metav1.APIResource) *restmapper.APIGroupResources {
		g := &restmapper.APIGroupResources{Group: metav1.APIGroup{Name: name}, VersionedResources: map[string][]metav1.APIResource{}}
		for _, v := range versions {
			g.Group.Versions = append(g.Group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: name + "/" + v, Version: v})
			g.VersionedResources[v] = []metav1.APIResource{r}
		}
		g.Group.PreferredVersion = g.Group.Versions[0]
		return g
	}
	mapper := restmapper.NewDiscoveryRESTMapper([]*restmapper.APIGroupResources{
		group("kubevirt.io", []string{"v1"}, resource("virtualmachines", "virtualmachine", "VirtualMachine", "vm", "vms")),
		group(schema.Group, []string{"v1", "v1beta1", "v1alpha1"}, resource("virtualmachines", "virtualmachine", "VirtualMachine", "vm")),
		group("example.com", []string{"v2"}, resource("vmachines", "vmachine", "VirtualMachine")),
		group("compute.example.org", []string{"v1"}, resource("machines", "machine", "Machine")),
	})
	for _, tc := range []struct{ apiVersion, kind, resource string }{
		{schema.Group + "/v1alpha1", "VirtualMachine", "virtualmachines"},
		{schema.Group + "/v1beta1", "VirtualMachine", "virtualmachines"},
		{"kubevirt.io/v1", "VirtualMachine", "virtualmachines"},
		{"example.com/v2", "VirtualMachine", "vmachines"},
		{"compute.example.org/v1", "Machine", "machines"},
	} {
		vm, err := schema.Parse([]byte(fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"name":"db","namespace":"prod"}}`,
			tc.apiVersion, tc.kind)), builtin("v1alpha1")(t))
		if err != nil {
			t.Fatal(err)
		}
		gv, _ := k8sschema.ParseGroupVersion(tc.apiVersion)
		for _, at := range []refVersion{anyVersion, itsVersion} {
			ref := kubectlRef(vm, at)
			typ, rest, _ := strings.Cut(ref, "/")
			if rest != "db -n prod" {
				t.Errorf("%s: %q does not name db in prod", tc.apiVersion, ref)
			}
			got, err := kubectlResource(mapper, typ)
			want := gv.WithResource(tc.resource)
			if at == anyVersion {
				got.Version, want.Version = "", "" // kubectl's preferred version: any will do
			}
			if err != nil || got != want {
				t.Errorf("%s: kubectl reads %s as %v (%v), want %v", tc.apiVersion, typ, got, err, want)
			}
		}
	}
}

// kubectlResource is the resource kubectl reaches for TYPE in TYPE/NAME given mapper, as
// cli-runtime's Builder.mappingFor finds it (after the short names are expanded, which the
// group-qualified names of kubectlRef never are): TYPE as a resource (resource.version.group,
// then resource.group), then as a kind (kind.version.group, then kind.group).
func kubectlResource(mapper meta.RESTMapper, typ string) (k8sschema.GroupVersionResource, error) {
	full, gr := k8sschema.ParseResourceArg(typ)
	var gvk k8sschema.GroupVersionKind
	if full != nil {
		gvk, _ = mapper.KindFor(*full)
	}
	if gvk.Empty() {
		gvk, _ = mapper.KindFor(gr.WithVersion(""))
	}
	if !gvk.Empty() {
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return k8sschema.GroupVersionResource{}, err
		}
		return m.Resource, nil
	}
	fullKind, gk := k8sschema.ParseKindArg(typ)
	if fullKind != nil && !fullKind.Empty() {
		if m, err := mapper.RESTMapping(fullKind.GroupKind(), fullKind.Version); err == nil {
			return m.Resource, nil
		}
	}
	m, err := mapper.RESTMapping(gk)
	if err != nil {
		return k8sschema.GroupVersionResource{}, err
	}
	return m.Resource, nil
}

// TestPluginCommand: the plugin's command for a VM names it and its namespace; told no flags
// (the controller's messages), it carries for a VM of another group --api-version and
// placeholders for what the controller does not know; told the flags the plugin ran with, it
// repeats those that are not the plugin's defaults, quoted where a shell would split them, and
// takes their namespace only for a VM without one.
func TestPluginCommand(t *testing.T) {
	vm := func(apiVersion, namespace string) schema.VirtualMachine {
		raw := fmt.Sprintf(`{"apiVersion":%q,"kind":"VirtualMachine","metadata":{"name":"db","namespace":%q}}`, apiVersion, namespace)
		v, err := schema.Parse([]byte(raw), builtin("v1alpha1")(t))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := map[string]struct {
		vm    schema.VirtualMachine
		known *PluginFlags
		want  string
	}{
		"this project's group":  {vm(schema.DefaultAPIVersion, "prod"), nil, "kubectl vm start db -n prod"},
		"another version of it": {vm(schema.Group+"/v1beta1", "prod"), nil, "kubectl vm start db -n prod"},
		"another group": {vm("example.com/v2", "prod"), nil,
			"kubectl vm start db -n prod --api-version example.com/v2 --resource PLURAL --schema-file FIELDMAP"},
		"the plugin's defaults": {vm(schema.DefaultAPIVersion, "prod"),
			&PluginFlags{APIVersion: schema.DefaultAPIVersion, Resource: schema.DefaultResource}, "kubectl vm start db -n prod"},
		"the plugin's flags": {vm("example.com/v2", "prod"),
			&PluginFlags{Namespace: "other", Context: "c1", Kubeconfig: "/k/config", APIVersion: "example.com/v2", Resource: "machines", SchemaFile: "map.yaml"},
			"kubectl vm start db -n prod --context c1 --kubeconfig /k/config --api-version example.com/v2 --resource machines --schema-file map.yaml"},
		"values a shell splits": {vm(schema.DefaultAPIVersion, "prod"), &PluginFlags{Context: "it's mine", SchemaFile: "my maps/$HOME.yaml"},
			`kubectl vm start db -n prod --context 'it'\''s mine' --schema-file 'my maps/$HOME.yaml'`},
		"a VM without a namespace": {vm(schema.DefaultAPIVersion, ""), &PluginFlags{Namespace: "prod"}, "kubectl vm start db -n prod"},
	}
	for name, tc := range tests {
		if got := PluginCommand("start", tc.vm, tc.known); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}

// TestKubectlCarriesTheCluster: a plain kubectl command of the plugin's messages repeats the
// --context and --kubeconfig the plugin was run with, quoted as PluginCommand quotes them, and
// no other of its flags (kubectl has no --api-version, and -n is the command's own); told no
// flags (the controller's messages), it is the command as it is.
func TestKubectlCarriesTheCluster(t *testing.T) {
	const cmd = "kubectl delete node node-a"
	tests := map[string]struct {
		known *PluginFlags
		want  string
	}{
		"no flags known":    {nil, cmd},
		"none given":        {&PluginFlags{}, cmd},
		"not the cluster's": {&PluginFlags{Namespace: "prod", APIVersion: "example.com/v2", Resource: "machines", SchemaFile: "m.yaml"}, cmd},
		"the cluster's":     {&PluginFlags{Context: "c1", Kubeconfig: "/k/config"}, cmd + " --context c1 --kubeconfig /k/config"},
		"values a shell splits": {&PluginFlags{Context: "it's mine", Kubeconfig: "a b"},
			cmd + ` --context 'it'\''s mine' --kubeconfig 'a b'`},
	}
	for name, tc := range tests {
		if got := tc.known.Kubectl(cmd); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}
