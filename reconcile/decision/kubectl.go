package decision

import (
	"strings"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// The commands the messages give a user to act on the VM (restart it, resume it, start it,
// let its disk go). A user copies them from wherever they read the message (kubectl get
// events -A, a dashboard, an alert) into a shell whose namespace is not the VM's, and whose
// kubectl may resolve `vm` to another resource: it is the short name of this project's CRD
// (cloudnative.czs), not of the resource of another group a controller may run at
// (--api-version, docs/field-maps-and-versions.md), and KubeVirt's CRD has it as well
// (virtualmachines.kubevirt.io). So each command names the VM's namespace, and its type by the
// group the controller read it at (its apiVersion), as kubectl resolves it: the one object the
// message is about, or none, never another's.

// refVersion says whether a kubectl command names the VM's version as well as its group
// (kubectlRef).
type refVersion bool

const (
	// anyVersion: the command writes the VM's metadata (an annotation), which is the same in
	// every version, so it names none, and works whichever versions the CRD serves by then.
	anyVersion refVersion = false
	// itsVersion: the command writes paths of the VM's spec, which are the version's whose
	// field map gave them (deleteHint).
	itsVersion refVersion = true
)

// kubectlRef is how a kubectl command names vm: TYPE/NAME -n NAMESPACE, TYPE its kind in
// lowercase qualified by its group (virtualmachine.cloudnative.czs/db), or at itsVersion by
// its version and group (virtualmachine.v1alpha1.cloudnative.czs/db). kubectl reads TYPE as a
// resource (resource.version.group, then resource.group) and, failing that, as a kind
// (cli-runtime's Builder.mappingFor): the lowercase kind is the CRD's singular name unless the
// CRD names another, and a kind in lowercase matches either way (client-go's discovery
// RESTMapper maps it), so TYPE reaches the VM's resource whatever its plural, which the
// decision is not given. Without a version kubectl takes the version it prefers, which is
// right for an annotation and wrong for a spec path of another version: there the API server
// drops the unknown field with a warning (kubectl patch asks for no field validation), answers
// 200, and the patch changes nothing; so a spec patch names the VM's version, at which the
// controller reads it. A VM whose apiVersion has no group, or that has no kind, is not a custom
// resource as the API server serves it (a test's VM): vm/NAME.
func kubectlRef(vm schema.VirtualMachine, at refVersion) string {
	ref := "vm/" + vm.Name()
	group, version, ok := strings.Cut(vm.APIVersion(), "/")
	if kind := strings.ToLower(vm.Kind()); ok && group != "" && kind != "" {
		if at == itsVersion {
			kind += "." + version
		}
		ref = kind + "." + group + "/" + vm.Name()
	}
	if ns := vm.Namespace(); ns != "" {
		ref += " -n " + ns
	}
	return ref
}

// Annotate is the kubectl command that makes change to vm's annotations: "key-" removes one,
// "key=value --overwrite" sets one (stamp). The messages of the controller give it, and so do
// the refusals of the kubectl plugin, which name the VM as the controller does.
func Annotate(vm schema.VirtualMachine, change string) string {
	return "kubectl annotate " + kubectlRef(vm, anyVersion) + " " + change
}

// stamp is the change that sets the request annotation key to the time the command runs, as
// the kubectl plugin's verbs do.
func stamp(key string) string { return key + "=$(date -u +%FT%TZ) --overwrite" }

// plugin is the kubectl plugin's command of verb (start, stop, restart, migrate) for the VM.
// The plugin is told the resource by its flags, not by the VM's name, and its defaults are
// this project's group: for a VM of another group the command carries --api-version, the
// version the controller reads it at, and the flags the decision cannot fill in, as
// placeholders: the resource's plural (--resource) and the field map (--schema-file, which the
// plugin needs for any group but this project's: it reads no CRD). Without them it would read
// a VM of the name in this project's group, if there is one, and act on it.
func (d *decision) plugin(verb string) string {
	cmd := "kubectl vm " + verb + " " + d.vm.Name()
	if ns := d.vm.Namespace(); ns != "" {
		cmd += " -n " + ns
	}
	if group, _, ok := strings.Cut(d.vm.APIVersion(), "/"); ok && group != "" && group != schema.Group {
		cmd += " --api-version " + d.vm.APIVersion() + " --resource PLURAL --schema-file FIELDMAP"
	}
	return cmd
}
