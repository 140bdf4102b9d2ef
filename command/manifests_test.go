package command

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	"sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

func TestManifestsConfigValidate(t *testing.T) {
	tests := map[string]validateCase{
		"defaults":        {},
		"one namespace":   {args: []string{"--namespace", "vm-controller", "--watch-namespace", "vms"}},
		"api version":     {[]string{"--api-version", "v1"}, "api version", `api version "v1": want group/version, such as cloudnative.czs/v1alpha1`},
		"root disk":       {[]string{"--root-disk", "pvc"}, "--root-disk", `--root-disk "pvc": want claim or ephemeral`},
		"ephemeral":       {args: []string{"--root-disk", "ephemeral"}},
		"namespace":       {[]string{"--namespace", "A_B"}, "--namespace", `--namespace "A_B": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		"watch namespace": {[]string{"--watch-namespace", "A_B"}, "--watch-namespace", `--watch-namespace "A_B": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		"replicas":        {[]string{"--replicas", "0"}, "--replicas", "--replicas must be at least 1, got 0"},
		"replicas wrap":   {[]string{"--replicas", "4294967297"}, "--replicas", "--replicas must be at most 2147483647 (a Deployment's replicas are int32), got 4294967297"},
		"selector":        {args: []string{"--selector", "shard=a"}},
		"not a selector":  {[]string{"--selector", "a in (("}, "--selector", "--selector: unable to parse requirement: found '(', expected: ',', ')' or identifier"},
		// The CRD manifests ships serves virtualmachines: RBAC on vms and run --resource=vms
		// beside it crash-looped.
		"resource": {[]string{"--resource", "vms"}, "--resource",
			"--resource vms: the CRD manifests ships for cloudnative.czs (virtualmachines.cloudnative.czs) serves virtualmachines: give --resource virtualmachines; a CRD of another group, which manifests leaves to its owner, takes its own --api-version and --resource"},
		"another group's resource": {args: []string{"--api-version", "compute.example.org/v1", "--resource", "machines"}},
		// A Deployment run would not start in, or that the API server refuses, after the CRD
		// and the RBAC were applied.
		"no image": {[]string{"--image", ""}, "--image", "--image must not be empty"},
		"a version without a map": {[]string{"--api-version", "cloudnative.czs/v9"}, "--api-version",
			`--api-version cloudnative.czs/v9: no built-in field map for version "v9" of cloudnative.czs (built in: v1, v1alpha1, v1beta1)`},
		"a version with a map file":   {args: []string{"--api-version", "cloudnative.czs/v9", "--schema-file", "/nonexistent.yaml"}},
		"another group, its CRD read": {args: []string{"--api-version", "compute.example.org/v1"}},
		"another group, a map file":   {args: []string{"--api-version", "compute.example.org/v1", "--watch-crd=false", "--schema-file", "/nonexistent.yaml"}},
		"another group, neither": {[]string{"--api-version", "compute.example.org/v1", "--watch-crd=false"}, "--watch-crd",
			"--watch-crd=false grants no read of CRD virtualmachines.compute.example.org, from whose schema run chooses the field map of compute.example.org/v1 without --schema-file: give --schema-file, or keep --watch-crd"},
		// Deleting vms would delete the controller's ServiceAccount and Lease first: the
		// controller exited before removing its VMs' finalizers, and vms stayed Terminating.
		"one namespace, the controller in it": {[]string{"--namespace", "vms", "--watch-namespace", "vms"}, "--watch-namespace",
			"--namespace vms is the namespace --watch-namespace watches: deleting it would delete the controller's ServiceAccount and Lease before the controller removed its VMs' finalizers, and it would stay Terminating; install the controller in a namespace of its own, such as --namespace vm-controller --watch-namespace vms"},
		"the default namespace watched": {[]string{"--watch-namespace", "vm-controller"}, "--watch-namespace",
			"--namespace vm-controller is the namespace --watch-namespace watches: deleting it would delete the controller's ServiceAccount and Lease before the controller removed its VMs' finalizers, and it would stay Terminating; install the controller in a namespace of its own, such as --namespace vm-controller-controller --watch-namespace vm-controller"},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &manifestsConfig{}
		parseFlags(t, manifestsCommand(c, "(devel)"), args...)
		return c.Validate()
	})
}

// TestManifestsRefuseWhatRunRefuses: whatever --api-version and --schema-file manifests
// accepts, run accepts too; a field map run could not have is refused by both, with one
// message.
func TestManifestsRefuseWhatRunRefuses(t *testing.T) {
	for _, version := range []string{"cloudnative.czs/v1alpha1", "cloudnative.czs/v1beta1", "cloudnative.czs/v9", "compute.example.org/v1"} {
		for _, file := range []string{"", "/nonexistent.yaml"} {
			args := []string{"--api-version", version, "--schema-file", file}
			m := &manifestsConfig{}
			parseFlags(t, manifestsCommand(m, "(devel)"), args...)
			r := &runConfig{}
			parseFlags(t, runCommand(r), args...)
			mErr, rErr := errString(m.Validate()), errString(r.Validate())
			if mErr != rErr {
				t.Errorf("%q: manifests says %q, run %q", args, mErr, rErr)
			}
		}
	}
}

// TestManifestsImage: the default image is the one `make image` builds from the same commit,
// for the version the app was given (main's) and, without one, for the version Go recorded.
func TestManifestsImage(t *testing.T) {
	for version, want := range map[string]string{
		"v1.2.3": "ghcr.io/cloudnative-czs/vm-controller:v1.2.3",
		"":       "ghcr.io/cloudnative-czs/vm-controller:" + imageTag(buildVersion("")),
	} {
		var image string
		for _, cmd := range App(version).Commands {
			if cmd.Name == "manifests" {
				image = cmd.Flags[slices.IndexFunc(cmd.Flags, func(f cli.Flag) bool { return f.Names()[0] == "image" })].(*cli.StringFlag).Value
			}
		}
		if image != want {
			t.Errorf("App(%q): --image defaults to %q, want %q", version, image, want)
		}
	}
}

// TestManifestsServerImage: manifests' --server-image is run's, read from the same variable
// with the same default, and reaches the controller the Deployment runs: the default is left
// to run, another image is passed, whether given as a flag or in VMC_SERVER_IMAGE; an empty
// one is refused, as run refuses it.
func TestManifestsServerImage(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  string // VMC_SERVER_IMAGE; unset if empty
		want string // the argument run is given; "" for none
		err  string // the error, if refused
	}{
		"the default":                 {},
		"the default, named":          {args: []string{"--server-image", decision.DefaultPolicy.DefaultImage}},
		"another image":               {args: []string{"--server-image", "registry.example.org/server:2"}, want: "--server-image=registry.example.org/server:2"},
		"another image, from the env": {env: "registry.example.org/server:2", want: "--server-image=registry.example.org/server:2"},
		"the flag over the env":       {args: []string{"--server-image", "registry.example.org/server:3"}, env: "registry.example.org/server:2", want: "--server-image=registry.example.org/server:3"},
		"empty":                       {args: []string{"--server-image", ""}, err: "--server-image must not be empty"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("VMC_SERVER_IMAGE", tc.env)
			if tc.env == "" {
				os.Unsetenv("VMC_SERVER_IMAGE")
			}
			var out bytes.Buffer
			a := App("v1.0.0")
			a.Writer, a.ErrWriter = &out, &out
			err := a.Run(append([]string{"vm-controller", "manifests"}, tc.args...))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("manifests %q: %v, want %q", tc.args, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("manifests %q: %v\n%s", tc.args, err, out.String())
			}
			var got []string
			for _, line := range strings.Split(out.String(), "\n") {
				if _, arg, ok := strings.Cut(line, "- --server-image"); ok {
					got = append(got, "--server-image"+arg)
				}
			}
			if tc.want == "" && len(got) != 0 || tc.want != "" && !slices.Equal(got, []string{tc.want}) {
				t.Errorf("manifests %q with VMC_SERVER_IMAGE %q: run is given %q, want %q", tc.args, tc.env, got, tc.want)
			}
		})
	}
}

// TestManifestsConversion: --conversion webhook renders this project's CRD with v1, so it
// refuses another group; v1 is only served by that form.
func TestManifestsConversion(t *testing.T) {
	tests := map[string]validateCase{
		"webhook":            {args: []string{"--conversion", "webhook"}},
		"webhook on v1":      {args: []string{"--conversion", "webhook", "--api-version", "cloudnative.czs/v1"}},
		"v1 without webhook": {[]string{"--api-version", "cloudnative.czs/v1"}, "--conversion", "--api-version cloudnative.czs/v1 needs --conversion webhook: the plain CRD does not serve v1"},
		"another group":      {[]string{"--conversion", "webhook", "--api-version", "compute.example.org/v1"}, "--conversion", "--conversion webhook renders the CRD of cloudnative.czs; the CRD of compute.example.org is its owner's to ship"},
		"no webhook replica": {[]string{"--conversion", "webhook", "--webhook-replicas", "0"}, "--webhook-replicas", "--webhook-replicas must be at least 1, got 0"},
		"webhook replicas wrap": {[]string{"--conversion", "webhook", "--webhook-replicas", "4294967296"}, "--webhook-replicas",
			"--webhook-replicas must be at most 2147483647 (a Deployment's replicas are int32), got 4294967296"},
		"unknown":      {[]string{"--conversion", "Webhook"}, "--conversion", `--conversion "Webhook": want none or webhook`},
		"stored as v1": {args: []string{"--conversion", "webhook", "--storage-version", "v1"}},
		"storage v1 without webhook": {[]string{"--storage-version", "v1"}, "--storage-version",
			"--storage-version v1 needs --conversion webhook: the plain CRD stores v1alpha1"},
		"unknown storage version": {[]string{"--conversion", "webhook", "--storage-version", "v2"}, "--storage-version",
			`--storage-version "v2": want one of v1alpha1, v1beta1, v1`},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &manifestsConfig{}
		parseFlags(t, manifestsCommand(c, "(devel)"), args...)
		return c.Validate()
	})
}

// tagSyntax is the grammar of an image tag (the OCI distribution spec's).
var tagSyntax = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// TestImageTagOf: every case of testdata/image-tags.txt, which tools/image's TestTag reads too,
// so that `make image` and the default --image agree on the tag of a build.
func TestImageTagOf(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "testdata", "image-tags.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cases := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 4 || (fields[2] != "true" && fields[2] != "false") {
			t.Fatalf("testdata/image-tags.txt: %q: want version revision modified tag", line)
		}
		none := func(s string) string {
			if s == "-" {
				return ""
			}
			return s
		}
		version, revision, modified, want := none(fields[0]), none(fields[1]), fields[2] == "true", fields[3]
		if got := imageTagOf(version, revision, modified); got != want {
			t.Errorf("imageTagOf(%q, %q, %v) = %q, want %q", version, revision, modified, got, want)
		}
		if !tagSyntax.MatchString(want) {
			t.Errorf("%q is no image tag", want)
		}
		cases++
	}
	if cases == 0 {
		t.Fatal("testdata/image-tags.txt holds no case")
	}
}

// deployingDoc shows examples of manifests, and what each grants cluster-wide.
var deployingDoc = filepath.Join("..", "docs", "deploying.md")

// TestDeployingExamplesClusterWide renders each `vm-controller manifests` example of
// docs/deploying.md whose comment says what it grants cluster-wide, and holds the comment to
// the ClusterRole's rules: every cluster-scoped resource granted is named, and "no
// cluster-wide permission" means none. (The --root-disk ephemeral example said "no
// cluster-wide permission at all" and granted list and watch on its namespace.)
func TestDeployingExamplesClusterWide(t *testing.T) {
	doc, err := os.ReadFile(deployingDoc)
	if err != nil {
		t.Fatal(err)
	}
	// The word a comment names each resource by.
	words := map[string]string{"namespaces": "namespace", "storageclasses": "storageclass", "persistentvolumes": "persistentvolume",
		"nodes": "node", "customresourcedefinitions": "crd"}
	examples := 0
	for _, line := range strings.Split(string(doc), "\n") {
		cmd, comment, ok := strings.Cut(line, "#")
		if !strings.HasPrefix(line, "vm-controller manifests ") || !ok || !strings.Contains(comment, "cluster-wide") {
			continue
		}
		examples++
		cmd, _, _ = strings.Cut(cmd, "|")
		args := strings.Fields(cmd)
		t.Run(strings.Join(args[2:], " "), func(t *testing.T) {
			var out bytes.Buffer
			a := App("v1.0.0")
			a.Writer, a.ErrWriter = &out, &out
			if err := a.Run(args); err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			var granted []string
			for _, manifest := range strings.Split(out.String(), "\n---\n") {
				var obj struct {
					Kind  string `json:"kind"`
					Rules []struct {
						Resources []string `json:"resources"`
					} `json:"rules"`
				}
				if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
					t.Fatal(err)
				}
				if obj.Kind != "ClusterRole" {
					continue
				}
				for _, r := range obj.Rules {
					granted = append(granted, r.Resources...)
				}
			}
			// What the comment says of the cluster-wide permissions: the words after "cluster-wide".
			_, said, _ := strings.Cut(strings.ToLower(strings.ReplaceAll(comment, " ", "")), "cluster-wide")
			if strings.Contains(strings.ReplaceAll(comment, " ", ""), "nocluster-wide") && len(granted) > 0 {
				t.Errorf("%s: %q says no cluster-wide permission; the ClusterRole grants %v", deployingDoc, strings.TrimSpace(comment), granted)
			}
			for _, resource := range granted {
				word, known := words[resource]
				if !known {
					t.Fatalf("cluster-wide %s: add the word a comment names it by", resource)
				}
				if !strings.Contains(said, word) {
					t.Errorf("%s: %q does not say the ClusterRole grants %s", deployingDoc, strings.TrimSpace(comment), resource)
				}
			}
		})
	}
	if examples == 0 {
		t.Fatalf("%s: no example of manifests says what it grants cluster-wide", deployingDoc)
	}
}

// TestManifestsServerPodSecurity: manifests' --server-pod-security is run's, read from the same
// variable, and reaches the controller the Deployment runs unless it is none (run's default);
// a value run refuses is refused here, before anything is printed to apply.
func TestManifestsServerPodSecurity(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  string // VMC_SERVER_POD_SECURITY; unset if empty
		want string // the argument run is given; "" for none
		err  string // the error, if refused
	}{
		"the default":         {},
		"none, named":         {args: []string{"--server-pod-security", "none"}},
		"restricted":          {args: []string{"--server-pod-security", "restricted"}, want: "--server-pod-security=restricted"},
		"restricted, env":     {env: "restricted", want: "--server-pod-security=restricted"},
		"baseline is refused": {args: []string{"--server-pod-security", "baseline"}, err: `--server-pod-security "baseline": want none or restricted`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("VMC_SERVER_POD_SECURITY", tc.env)
			if tc.env == "" {
				os.Unsetenv("VMC_SERVER_POD_SECURITY")
			}
			var out bytes.Buffer
			a := App("v1.0.0")
			a.Writer, a.ErrWriter = &out, &out
			err := a.Run(append([]string{"vm-controller", "manifests"}, tc.args...))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || out.Len() != 0 {
					t.Fatalf("manifests %q: %v, printed %d bytes; want %q and nothing printed", tc.args, err, out.Len(), tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("manifests %q: %v\n%s", tc.args, err, out.String())
			}
			var got []string
			for _, line := range strings.Split(out.String(), "\n") {
				if _, arg, ok := strings.Cut(line, "- --server-pod-security"); ok {
					got = append(got, "--server-pod-security"+arg)
				}
			}
			if tc.want == "" && len(got) != 0 || tc.want != "" && !slices.Equal(got, []string{tc.want}) {
				t.Errorf("manifests %q with VMC_SERVER_POD_SECURITY %q: run is given %q, want %q", tc.args, tc.env, got, tc.want)
			}
		})
	}
}

// runMain runs vm-controller with args in-process as main does: stdout, stderr (main's
// "vm-controller: " line for an error) and the exit code.
func runMain(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	a := App("v1.0.0")
	a.Writer, a.ErrWriter = &out, &errOut
	code = RunMain(a, "vm-controller", append([]string{"vm-controller"}, args...), &errOut)
	return out.String(), errOut.String(), code
}

// TestManifestsResourceOfTheShippedCRD: for this project's group, manifests ships the CRD,
// which serves virtualmachines; another --resource was rendered with exit code 0 as RBAC on
// vms, vms/status and the CRD vms.cloudnative.czs, and a Deployment running
// run --resource=vms, which failed discovery and crash-looped beside the CRD it shipped. It
// is refused: one line naming what works, exit code 2, nothing printed to apply. Another
// group's CRD, which manifests does not ship, has the resource it serves.
func TestManifestsResourceOfTheShippedCRD(t *testing.T) {
	const refused = "vm-controller: --resource vms: the CRD manifests ships for cloudnative.czs (virtualmachines.cloudnative.czs) serves virtualmachines: give --resource virtualmachines; a CRD of another group, which manifests leaves to its owner, takes its own --api-version and --resource\n"
	for name, tc := range map[string]struct {
		args   []string
		stderr string // "" for exit code 0
	}{
		"vms":                     {args: []string{"--resource", "vms"}, stderr: refused},
		"vms, webhook conversion": {args: []string{"--resource", "vms", "--conversion", "webhook"}, stderr: refused},
		"vms, v1beta1":            {args: []string{"--api-version", "cloudnative.czs/v1beta1", "--resource", "vms"}, stderr: refused},
		"virtualmachines":         {args: []string{"--resource", "virtualmachines"}},
		"another group's plural":  {args: []string{"--api-version", "compute.example.org/v1", "--resource", "machines"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("VMC_RESOURCE", "")
			stdout, stderr, code := runMain(t, append([]string{"manifests"}, tc.args...)...)
			if tc.stderr == "" {
				if code != 0 || stderr != "" {
					t.Fatalf("manifests %q: exit code %d, %q; want 0", tc.args, code, stderr)
				}
				return
			}
			if code != 2 || stderr != tc.stderr || stdout != "" {
				t.Errorf("manifests %q: exit code %d, stderr %q, %d bytes printed; want exit code 2, %q and nothing printed", tc.args, code, stderr, len(stdout), tc.stderr)
			}
		})
	}
}

// TestManifestsSelector: manifests' --selector is run's, read from VMC_SELECTOR too, and
// reaches the Deployment's run as an argument, so that an install of several manages only
// its own VMs from its first pod on (manifests had no --selector: each install started
// unselected, managing every VM, until a kubectl set env rolled it out again). A selector
// run refuses is refused here: one line, exit code 2, nothing printed to apply.
func TestManifestsSelector(t *testing.T) {
	for name, tc := range map[string]struct {
		args   []string
		env    string // VMC_SELECTOR; unset if empty
		want   string // the argument run is given; "" for none
		stderr string // the error, if refused
	}{
		"none":                  {},
		"shard=a":               {args: []string{"--selector", "shard=a"}, want: "--selector=shard=a"},
		"from the env":          {env: "shard!=a", want: "--selector=shard!=a"},
		"the flag over the env": {args: []string{"--selector", "shard in (a,b)"}, env: "shard=c", want: "--selector=shard in (a,b)"},
		"not a selector": {args: []string{"--selector", "a in (("},
			stderr: "vm-controller: --selector: unable to parse requirement: found '(', expected: ',', ')' or identifier\n"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("VMC_SELECTOR", tc.env)
			if tc.env == "" {
				os.Unsetenv("VMC_SELECTOR")
			}
			stdout, stderr, code := runMain(t, append([]string{"manifests"}, tc.args...)...)
			if tc.stderr != "" {
				if code != 2 || stderr != tc.stderr || stdout != "" {
					t.Fatalf("manifests %q: exit code %d, stderr %q, %d bytes printed; want exit code 2, %q and nothing printed", tc.args, code, stderr, len(stdout), tc.stderr)
				}
				return
			}
			if code != 0 {
				t.Fatalf("manifests %q: exit code %d, %s", tc.args, code, stderr)
			}
			var got []string
			for _, line := range strings.Split(stdout, "\n") {
				if _, arg, ok := strings.Cut(line, "- --selector="); ok {
					got = append(got, "--selector="+strings.Trim(arg, "'"))
				}
			}
			if tc.want == "" && len(got) != 0 || tc.want != "" && !slices.Equal(got, []string{tc.want}) {
				t.Errorf("manifests %q with VMC_SELECTOR %q: run is given %q, want %q", tc.args, tc.env, got, tc.want)
			}
		})
	}
}

// TestManifestsSelectorAsRun: manifests accepts and refuses the selectors run does, with
// run's message, so that it renders no Deployment whose run refuses its --selector.
func TestManifestsSelectorAsRun(t *testing.T) {
	for _, selector := range []string{"", "shard=a", "shard!=a", "shard notin (a,b)", "!shard", "tier in (prod", "a=b=c", "a in ((", "Bad Key=x", "shard=" + strings.Repeat("x", 64)} {
		m := &manifestsConfig{}
		parseFlags(t, manifestsCommand(m, "(devel)"), "--selector", selector)
		r := &runConfig{}
		parseFlags(t, runCommand(r), "--selector", selector)
		if mErr, rErr := errString(m.Validate()), errString(r.Validate()); mErr != rErr {
			t.Errorf("--selector %q: manifests says %q, run %q", selector, mErr, rErr)
		}
	}
}

// TestInstallNamespaceRefusedAlike: a --namespace no namespace could have is refused by every
// install command with one message, manifests' (validLabel). crds --conversion webhook wrote
// it into the CRD's conversion Service with exit code 0, and webhook went on to its
// kubeconfig and the cluster.
func TestInstallNamespaceRefusedAlike(t *testing.T) {
	const want = `vm-controller: --namespace "Bad_NS": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')` + "\n"
	for _, args := range [][]string{
		{"manifests", "--namespace", "Bad_NS"},
		{"crds", "--conversion", "webhook", "--namespace", "Bad_NS"},
		{"webhook", "--namespace", "Bad_NS", "--kubeconfig", "/nonexistent/kubeconfig"},
	} {
		stdout, stderr, code := runMain(t, args...)
		if code != 2 || stderr != want || stdout != "" {
			t.Errorf("%q: exit code %d, stderr %q, %d bytes printed; want exit code 2, %q and nothing printed", args, code, stderr, len(stdout), want)
		}
	}
}

// TestSeveralInstallsSelected renders each install of docs/several-installs.md as the page
// gives it and holds it to its selector: every Deployment runs run with --selector from its
// first pod on. The page applied each install without one, and set VMC_SELECTOR afterwards,
// so that for a while each managed every VM, unaware of the other.
func TestSeveralInstallsSelected(t *testing.T) {
	page := filepath.Join("..", "docs", "several-installs.md")
	doc, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	installs := 0
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "kubectl ") && strings.Contains(line, " set env ") {
			t.Errorf("%s: %q: a selector set after the install is applied", page, line)
		}
		if !strings.HasPrefix(line, "vm-controller manifests ") {
			continue
		}
		installs++
		cmd, _, _ := strings.Cut(line, "|")
		args := shellWords(t, cmd)
		t.Run(strings.Join(args[2:], " "), func(t *testing.T) {
			t.Setenv("VMC_SELECTOR", "")
			os.Unsetenv("VMC_SELECTOR")
			stdout, stderr, code := runMain(t, args[1:]...)
			if code != 0 {
				t.Fatalf("exit code %d: %s", code, stderr)
			}
			i := slices.Index(args, "--selector")
			if i < 0 || i+1 == len(args) {
				t.Fatalf("%s: %q gives no --selector", page, line)
			}
			if want := "- --selector=" + args[i+1]; !strings.Contains(stdout, want) {
				t.Errorf("the Deployment does not run with %s", strings.TrimPrefix(want, "- "))
			}
		})
	}
	if installs < 2 {
		t.Fatalf("%s: %d installs, want the two of the example", page, installs)
	}
}

// shellWords splits a command line of the docs as the shell does, for the quoting they use:
// words separated by spaces, a '...' word taken as it is.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	for rest := strings.TrimSpace(line); rest != ""; rest = strings.TrimLeft(rest, " ") {
		if strings.HasPrefix(rest, "'") {
			word, after, ok := strings.Cut(rest[1:], "'")
			if !ok {
				t.Fatalf("%q: an unclosed quote", line)
			}
			words, rest = append(words, word), after
			continue
		}
		word, after, _ := strings.Cut(rest, " ")
		words, rest = append(words, word), after
	}
	return words
}

// TestManifestsStorageVersion: manifests --conversion webhook renders the CRD storing the
// version --storage-version (or VMC_STORAGE_VERSION) names, and refuses one with crds'
// message. It had no such flag and rendered v1alpha1: an upgrade that applied it over a CRD
// migrated to v1 made v1alpha1 the storage version again, the API server stored every later
// write in it and listed it in status.storedVersions, undoing the migration.
func TestManifestsStorageVersion(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  string // VMC_STORAGE_VERSION; unset if empty
		want string // the version the CRD stores
	}{
		"the default":      {want: "v1alpha1"},
		"v1":               {args: []string{"--storage-version", "v1"}, want: "v1"},
		"v1beta1":          {args: []string{"--storage-version", "v1beta1"}, want: "v1beta1"},
		"v1, from the env": {env: "v1", want: "v1"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("VMC_STORAGE_VERSION", tc.env)
			if tc.env == "" {
				os.Unsetenv("VMC_STORAGE_VERSION")
			}
			stdout, stderr, code := runMain(t, append([]string{"manifests", "--conversion", "webhook"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("manifests %q: exit code %d: %s", tc.args, code, stderr)
			}
			crd, _, _ := strings.Cut(stdout, "\n---\n")
			data, err := yaml.YAMLToJSON([]byte(crd))
			if err != nil {
				t.Fatal(err)
			}
			gvr, err := crds.StorageResource(data)
			if err != nil {
				t.Fatal(err)
			}
			if gvr.Version != tc.want {
				t.Errorf("manifests %q with VMC_STORAGE_VERSION %q: the CRD stores %s, want %s", tc.args, tc.env, gvr.Version, tc.want)
			}
		})
	}
	// One check for both commands: what crds refuses, manifests refuses with the same words.
	for _, args := range [][]string{
		{"--storage-version", "v1"},
		{"--storage-version", "v1alpha1"},
		{"--conversion", "webhook", "--storage-version", "v2"},
		{"--conversion", "webhook", "--storage-version", "v1"},
	} {
		m := &manifestsConfig{}
		parseFlags(t, manifestsCommand(m, "(devel)"), args...)
		c := &crdsConfig{}
		parseFlags(t, crdsCommand(c), args...)
		if mErr, cErr := errString(m.Validate()), errString(c.Validate()); mErr != cErr {
			t.Errorf("%q: manifests says %q, crds %q", args, mErr, cErr)
		}
	}
}
