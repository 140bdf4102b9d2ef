package command

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/cloudnative-czs/vm-controller/deploy"
)

// setEnv sets each variable of env, and unsets those of names it does not give, for the test.
func setEnv(t *testing.T, names []string, env map[string]string) {
	t.Helper()
	for _, name := range names {
		t.Setenv(name, env[name])
		if _, ok := env[name]; !ok {
			os.Unsetenv(name)
		}
	}
}

// The variables that name a namespace to some command.
var namespaceEnvs = []string{"VMC_NAMESPACE", installNamespaceEnv, "POD_NAMESPACE"}

// TestInstallNamespaceEnv: the install commands' --namespace (manifests, crds, webhook) reads
// VMC_INSTALL_NAMESPACE, not VMC_NAMESPACE, which is run's and check's namespace of the VMs:
// an environment set for run (VMC_NAMESPACE=vms) once installed the controller into vms and
// pointed the conversion webhook at a Service there.
func TestInstallNamespaceEnv(t *testing.T) {
	commands := map[string]func() (*cli.Command, *string){
		"manifests": func() (*cli.Command, *string) {
			c := &manifestsConfig{}
			return manifestsCommand(c, "v1.0.0"), &c.Namespace
		},
		"crds": func() (*cli.Command, *string) {
			c := &crdsConfig{}
			return crdsCommand(c), &c.Namespace
		},
		"webhook": func() (*cli.Command, *string) {
			c := &webhookConfig{}
			return webhookCommand(c), &c.Namespace
		},
	}
	tests := map[string]struct {
		args     []string
		env      map[string]string
		commands []string // those the row is for; all when empty
		want     string
	}{
		"the default":                      {want: deploy.DefaultNamespace},
		"VMC_NAMESPACE is the VMs'":        {env: map[string]string{"VMC_NAMESPACE": "vms"}, want: deploy.DefaultNamespace},
		"VMC_INSTALL_NAMESPACE":            {env: map[string]string{"VMC_NAMESPACE": "vms", installNamespaceEnv: "ops"}, want: "ops"},
		"the flag":                         {args: []string{"--namespace", "ops"}, env: map[string]string{"VMC_NAMESPACE": "vms"}, want: "ops"},
		"the flag over the variable":       {args: []string{"--namespace", "ops"}, env: map[string]string{installNamespaceEnv: "other"}, want: "ops"},
		"the pod's namespace":              {env: map[string]string{"VMC_NAMESPACE": "vms", "POD_NAMESPACE": "ops"}, commands: []string{"webhook"}, want: "ops"},
		"VMC_INSTALL_NAMESPACE over pod's": {env: map[string]string{installNamespaceEnv: "ops", "POD_NAMESPACE": "other"}, commands: []string{"webhook"}, want: "ops"},
	}
	for name, tc := range tests {
		for cmdName, build := range commands {
			if len(tc.commands) > 0 && !slices.Contains(tc.commands, cmdName) {
				continue
			}
			t.Run(name+"/"+cmdName, func(t *testing.T) {
				setEnv(t, namespaceEnvs, tc.env)
				cmd, namespace := build()
				set := flag.NewFlagSet(cmdName, flag.ContinueOnError)
				for _, f := range cmd.Flags {
					if err := f.Apply(set); err != nil {
						t.Fatal(err)
					}
				}
				if err := set.Parse(tc.args); err != nil {
					t.Fatal(err)
				}
				if *namespace != tc.want {
					t.Errorf("%s %q with %v: --namespace %q, want %q", cmdName, tc.args, tc.env, *namespace, tc.want)
				}
			})
		}
	}
}

// TestUnreadNamespaceEnvWarned: an install command that does not read VMC_NAMESPACE, which is
// set and would have given another namespace, says so on stderr, so that a script that set it
// for the install commands sees why they install into the default namespace; it says nothing
// where the install namespace was given, or where VMC_NAMESPACE is not set or is the same.
func TestUnreadNamespaceEnvWarned(t *testing.T) {
	const warning = "warning: VMC_NAMESPACE=vms is not read: it is run's and check's, the VMs' namespace; the install namespace is vm-controller (--namespace, VMC_INSTALL_NAMESPACE)"
	tests := map[string]struct {
		args []string
		env  map[string]string
		warn bool
	}{
		"manifests":                             {args: []string{"manifests"}, env: map[string]string{"VMC_NAMESPACE": "vms"}, warn: true},
		"crds --conversion webhook":             {args: []string{"crds", "--conversion", "webhook"}, env: map[string]string{"VMC_NAMESPACE": "vms"}, warn: true},
		"crds, with no webhook to place":        {args: []string{"crds"}, env: map[string]string{"VMC_NAMESPACE": "vms"}},
		"manifests --namespace":                 {args: []string{"manifests", "--namespace", "ops"}, env: map[string]string{"VMC_NAMESPACE": "vms"}},
		"manifests, VMC_INSTALL_NAMESPACE":      {args: []string{"manifests"}, env: map[string]string{"VMC_NAMESPACE": "vms", installNamespaceEnv: "ops"}},
		"manifests, no VMC_NAMESPACE":           {args: []string{"manifests"}},
		"manifests, the same namespace":         {args: []string{"manifests"}, env: map[string]string{"VMC_NAMESPACE": deploy.DefaultNamespace}},
		"crds --conversion webhook --namespace": {args: []string{"crds", "--conversion", "webhook", "--namespace", "ops"}, env: map[string]string{"VMC_NAMESPACE": "vms"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			setEnv(t, namespaceEnvs, tc.env)
			var out, errOut bytes.Buffer
			a := App("v1.0.0")
			a.Writer, a.ErrWriter = &out, &errOut
			if err := a.Run(append([]string{"vm-controller"}, tc.args...)); err != nil {
				t.Fatalf("%q: %v\n%s", tc.args, err, errOut.String())
			}
			if got := strings.Contains(errOut.String(), "vm-controller "+tc.args[0]+": "+warning); got != tc.warn {
				t.Errorf("%q with %v: warned %v, want %v; stderr:\n%s", tc.args, tc.env, got, tc.warn, errOut.String())
			}
			if strings.Contains(out.String(), "namespace: vms") {
				t.Errorf("%q with %v: the output names namespace vms:\n%s", tc.args, tc.env, out.String())
			}
		})
	}
}

// TestWebhookUnreadNamespaceEnvWarned: the webhook, which keeps its self-managed certificates
// in a Secret of its namespace, logs that VMC_NAMESPACE is not read where it would have given
// another namespace; it says nothing when POD_NAMESPACE (in a pod) gives the namespace. The
// kubeconfig is one that does not exist, so that the command ends right after the warning.
func TestWebhookUnreadNamespaceEnvWarned(t *testing.T) {
	for name, tc := range map[string]struct {
		env  map[string]string
		warn bool
	}{
		"VMC_NAMESPACE only": {env: map[string]string{"VMC_NAMESPACE": "vms"}, warn: true},
		"in a pod":           {env: map[string]string{"VMC_NAMESPACE": "vms", "POD_NAMESPACE": "ops"}},
	} {
		t.Run(name, func(t *testing.T) {
			setEnv(t, namespaceEnvs, tc.env)
			var out, errOut bytes.Buffer
			a := App("v1.0.0")
			a.Writer, a.ErrWriter = &out, &errOut
			err := a.Run([]string{"vm-controller", "webhook", "--kubeconfig", filepath.Join(t.TempDir(), "none"), "--log-format", "text"})
			if err == nil {
				t.Fatal("webhook with a kubeconfig that does not exist: no error")
			}
			got := strings.Contains(errOut.String(), "VMC_NAMESPACE is not read") && strings.Contains(errOut.String(), "VMC_NAMESPACE=vms")
			if got != tc.warn {
				t.Errorf("with %v: warned %v, want %v; stderr:\n%s", tc.env, got, tc.warn, errOut.String())
			}
		})
	}
}
