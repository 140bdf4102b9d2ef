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
// the refusals of the kubectl plugin, which name the VM as the controller does and add the
// cluster the plugin read (PluginFlags.Kubectl).
func Annotate(vm schema.VirtualMachine, change string) string {
	return "kubectl annotate " + kubectlRef(vm, anyVersion) + " " + change
}

// stamp is the change that sets the request annotation key to the time the command runs, as
// the kubectl plugin's verbs do.
func stamp(key string) string { return key + "=$(date -u +%FT%TZ) --overwrite" }

// PluginFlags are the flags of the kubectl plugin that a command of it is to carry besides the
// VM's name and namespace: those the plugin was run with, which it echoes in the commands its
// own messages give, so that a command pasted as it is reaches the VM the plugin read
// (PluginCommand), and of which the plain kubectl commands they give repeat those that choose
// the cluster (Kubectl). Empty means the plugin's default; Namespace is taken only where the
// VM has none (a VM read from the cluster always has its own).
type PluginFlags struct {
	Namespace, Context, Kubeconfig   string
	APIVersion, Resource, SchemaFile string
}

// PluginCommand is the kubectl plugin's command of verb (start, stop, restart, migrate) for
// vm: kubectl vm VERB NAME -n NAMESPACE, and the flags that make the plugin read the VM there.
// The controller's messages and the plugin's own give it so, each from what it knows. The
// plugin knows the flags it was run with (known), and the command repeats those that are not
// its defaults: --context, --kubeconfig, --api-version, --resource, --schema-file. The
// controller does not (known nil): it knows the VM's apiVersion only, and the plugin's
// defaults are this project's group, so for a VM of another group the command carries
// --api-version and, as placeholders, the flags the controller cannot fill in: the resource's
// plural (--resource) and the field map (--schema-file, which the plugin needs for any group
// but this project's: it reads no CRD). Without them the plugin would read a VM of the name in
// this project's group, if there is one, and act on it; without -n, a VM of the name in the
// namespace of the shell's kubeconfig.
func PluginCommand(verb string, vm schema.VirtualMachine, known *PluginFlags) string {
	words := []string{"kubectl", "vm", verb, vm.Name()}
	ns := vm.Namespace()
	if ns == "" && known != nil {
		ns = known.Namespace
	}
	if ns != "" {
		words = append(words, "-n", ns)
	}
	if known == nil {
		if group, _, ok := strings.Cut(vm.APIVersion(), "/"); ok && group != "" && group != schema.Group {
			words = append(words, "--api-version", vm.APIVersion(), "--resource", "PLURAL", "--schema-file", "FIELDMAP")
		}
		return strings.Join(words, " ")
	}
	words = known.clusterWords(words)
	for _, f := range []struct{ flag, value, unset string }{
		{"--api-version", known.APIVersion, schema.DefaultAPIVersion},
		{"--resource", known.Resource, schema.DefaultResource},
		{"--schema-file", known.SchemaFile, ""},
	} {
		if f.value != "" && f.value != f.unset {
			words = append(words, f.flag, shellWord(f.value))
		}
	}
	return strings.Join(words, " ")
}

// Kubectl is command, a kubectl command line the plugin's messages give (kubectl annotate of
// Annotate, kubectl delete node), with the flags of f that choose the cluster: --context and
// --kubeconfig, which kubectl takes as the plugin does, as PluginCommand gives them. Without
// them, the command pasted in a shell whose kubeconfig points at another cluster acts there:
// on a VM of the name, or on a node of the name, which it deletes. f nil (the controller's
// messages, which know no such flags): command as it is. The flags go last, where kubectl
// takes them as well, after the whole of command (a --overwrite included).
func (f *PluginFlags) Kubectl(command string) string {
	if f == nil {
		return command
	}
	return strings.Join(f.clusterWords([]string{command}), " ")
}

// clusterWords are words followed by the flags of f that choose the cluster the plugin read
// (--context, --kubeconfig), those that were given, each value a shell word: the part that
// PluginCommand and Kubectl share.
func (f *PluginFlags) clusterWords(words []string) []string {
	for _, c := range []struct{ flag, value string }{{"--context", f.Context}, {"--kubeconfig", f.Kubeconfig}} {
		if c.value != "" {
			words = append(words, c.flag, shellWord(c.value))
		}
	}
	return words
}

// shellWord is s as one word of a shell's command line: as it is when it holds only
// characters no shell reads specially (a name, a version, most paths), else in single quotes.
// A file's path or a context's name may hold anything.
func shellWord(s string) string {
	if strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" && s != "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// plugin is the kubectl plugin's command of verb for the VM, as the controller gives it
// (PluginCommand, no flags known).
func (d *decision) plugin(verb string) string { return PluginCommand(verb, d.vm, nil) }
