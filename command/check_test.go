package command

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestCheckConfigValidate(t *testing.T) {
	tests := map[string]validateCase{
		"defaults":    {},
		"api version": {[]string{"--api-version", "v1"}, "api version", `api version "v1": want group/version, such as cloudnative.czs/v1alpha1`},
		"root disk":   {[]string{"--root-disk", "pvc"}, "--root-disk", `--root-disk "pvc": want claim or ephemeral`},
		"ephemeral":   {args: []string{"--root-disk", "ephemeral"}},
		"a version without a map": {[]string{"--api-version", "cloudnative.czs/v9"}, "--api-version",
			`--api-version cloudnative.czs/v9: no built-in field map for version "v9" of cloudnative.czs (built in: v1, v1alpha1, v1beta1)`},
		"service account": {args: []string{"--service-account", "vm-controller/vm-controller"}},
		"service account name only": {[]string{"--service-account", "vm-controller"}, "--service-account",
			`--service-account "vm-controller": want NAMESPACE/NAME, such as vm-controller/vm-controller`},
		"service account without a name": {[]string{"--service-account", "vm-controller/"}, "--service-account",
			`--service-account "vm-controller/": want NAMESPACE/NAME, such as vm-controller/vm-controller`},
		"service account namespace": {[]string{"--service-account", "VMs/vm-controller"}, "--service-account",
			`--service-account "VMs/vm-controller": namespace: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		"service account name": {[]string{"--service-account", "vms/a/b"}, "--service-account",
			`--service-account "vms/a/b": name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		"namespace": {[]string{"--namespace", "A_B"}, "--namespace", `--namespace "A_B": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &checkConfig{}
		parseFlags(t, checkCommand(c), args...)
		return c.Validate()
	})
}

// TestCheckNamespace: check --namespace says whether the namespace exists; one that does not,
// or is being deleted, is a warning before the rbac rows checked in it (every row passed for a
// namespace that did not exist), and check still exits 0, as run still starts.
func TestCheckNamespace(t *testing.T) {
	tests := map[string]struct {
		namespaces map[string]bool // the cluster's, each with whether it is being deleted
		row        string
	}{
		"exists":           {map[string]bool{"vms": false, "other": false}, "namespace  pass    namespace vms exists"},
		"does not exist":   {map[string]bool{"other": false}, "namespace  WARN    namespace vms does not exist: the controller watches it all the same and finds no VMs there until it is created; check --namespace"},
		"being deleted":    {map[string]bool{"vms": true}, "namespace  WARN    namespace vms is being deleted"},
		"no namespace yet": {map[string]bool{}, "namespace  WARN    namespace vms does not exist"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := newFakeAPIServer(t, ownGVR, establishedCRD(t, ownCRDFile))
			srv.namespaces = tc.namespaces
			var out, errOut bytes.Buffer
			a := App("")
			a.Writer, a.ErrWriter = &out, &errOut
			err := a.Run([]string{"vm-controller", "check", "--kubeconfig", srv.kubeconfig(t), "--api-version", ownGVR.GroupVersion().String(), "--namespace", "vms"})
			if err != nil {
				t.Fatalf("check: %v\n%s", err, out.String())
			}
			lines := strings.Split(out.String(), "\n")
			i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, tc.row) })
			if i < 0 || !strings.HasPrefix(lines[i+1], "rbac ") || slices.ContainsFunc(lines[:i], func(l string) bool { return strings.HasPrefix(l, "rbac ") }) {
				t.Errorf("want the row %q before the rbac rows:\n%s", tc.row, out.String())
			}
		})
	}
	// Without --namespace, no row.
	srv := newFakeAPIServer(t, ownGVR, establishedCRD(t, ownCRDFile))
	var out bytes.Buffer
	a := App("")
	a.Writer, a.ErrWriter = &out, &out
	if err := a.Run([]string{"vm-controller", "check", "--kubeconfig", srv.kubeconfig(t), "--api-version", ownGVR.GroupVersion().String()}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "\nnamespace ") {
		t.Errorf("a namespace row without --namespace:\n%s", out.String())
	}
}

// TestCheckHelpNamesRunsFlags: check --help names exactly the flags of run that check takes,
// and check refuses each of run's others with exit code 2. It said "Give it the flags you
// give run", and check --leader-elect --metrics-addr=:8080 was refused: flag provided but not
// defined.
func TestCheckHelpNamesRunsFlags(t *testing.T) {
	names := func(cmd *cli.Command) []string {
		var out []string
		for _, f := range cmd.Flags {
			out = append(out, "--"+f.Names()[0])
		}
		return out
	}
	checkFlags := names(checkCommand(&checkConfig{}))
	var taken, refused []string
	for _, f := range names(runCommand(&runConfig{})) {
		if slices.Contains(checkFlags, f) {
			taken = append(taken, f)
		} else {
			refused = append(refused, f)
		}
	}
	help, _, code := runMain(t, "check", "--help")
	if code != 0 {
		t.Fatalf("check --help: exit code %d", code)
	}
	_, said, ok := strings.Cut(strings.Join(strings.Fields(help), " "), "Of run's flags it takes those that decide what it checks: ")
	said, _, _ = strings.Cut(said, ";")
	listed := strings.Fields(strings.NewReplacer(",", " ", " and ", " ").Replace(said))
	slices.Sort(listed)
	slices.Sort(taken)
	if !ok || !slices.Equal(listed, taken) {
		t.Errorf("check --help names %q of run's flags; check takes %q", listed, taken)
	}
	for _, f := range refused {
		_, stderr, code := runMain(t, "check", f+"=x")
		if code != 2 || !strings.Contains(stderr, "flag provided but not defined: -"+strings.TrimPrefix(f, "--")) {
			t.Errorf("check %s=x: exit code %d, %q; want the flag refused, exit code 2", f, code, stderr)
		}
	}
}
