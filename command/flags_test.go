package command

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// parseFlags fills a command's configuration from args the way the command line does: every
// flag's declared default, then the arguments. The variables the flags read are cleared from
// the test's environment first, so that the defaults are the declared ones.
func parseFlags(t *testing.T, cmd *cli.Command, args ...string) {
	t.Helper()
	for _, f := range cmd.Flags {
		if df, ok := f.(cli.DocGenerationFlag); ok {
			for _, name := range df.GetEnvVars() {
				t.Setenv(name, "")
				os.Unsetenv(name)
			}
		}
	}
	set := flag.NewFlagSet(cmd.Name, flag.ContinueOnError)
	for _, f := range cmd.Flags {
		if err := f.Apply(set); err != nil {
			t.Fatal(err)
		}
	}
	if err := set.Parse(args); err != nil {
		t.Fatal(err)
	}
}

// validateCase is one row of a Validate table: the arguments, and the error they give ("" for
// none). A row's error must name its flag, given as it appears in the message.
type validateCase struct {
	args []string
	flag string // the flag the error names; "" for a valid row
	want string
}

func checkValidate(t *testing.T, tests map[string]validateCase, validate func(args []string) error) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := validate(tc.args)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("Validate() = %q, want %q", got, tc.want)
			}
			if tc.want != "" && !strings.Contains(got, tc.flag) {
				t.Errorf("the error %q does not name %s", got, tc.flag)
			}
		})
	}
}

// noEnv are the flags of vm-controller that read no environment variable, each with why: the
// variable its name gives means something else to the commands that read it.
var noEnv = map[string]string{
	"plan --api-version": "VMC_API_VERSION is the version the controller watches, which the API server converts VMs to; plan does not convert its file",
}

// renamedEnv are the flags of vm-controller whose variable is not the one their name gives,
// each with the variable they read first and why: the one their name gives means something
// else to the commands that read it.
var renamedEnv = map[string]struct{ env, why string }{
	"manifests --namespace": {installNamespaceEnv, installNamespaceWhy},
	"crds --namespace":      {installNamespaceEnv, installNamespaceWhy},
	"webhook --namespace":   {installNamespaceEnv, installNamespaceWhy},
}

const installNamespaceWhy = "VMC_NAMESPACE is run's and check's --namespace, the VMs'; this one is the namespace the controller and its webhook are installed in"

// TestFlagsHaveEnv: every flag of every command can be set by its environment variable,
// VMC_ and the flag's name in upper snake case, read before any other it has; but for those
// of noEnv, which read none, and those of renamedEnv, which read theirs.
func TestFlagsHaveEnv(t *testing.T) {
	renamed := map[string]bool{}
	for _, cmd := range App("").Commands {
		for _, f := range cmd.Flags {
			df, ok := f.(cli.DocGenerationFlag)
			if !ok {
				t.Errorf("%s --%s: no environment variable to read", cmd.Name, f.Names()[0])
				continue
			}
			envs := df.GetEnvVars()
			if _, ok := noEnv[cmd.Name+" --"+f.Names()[0]]; ok {
				if len(envs) != 0 {
					t.Errorf("%s --%s: environment %v, want none", cmd.Name, f.Names()[0], envs)
				}
				continue
			}
			want := "VMC_" + strings.ToUpper(strings.ReplaceAll(f.Names()[0], "-", "_"))
			if r, ok := renamedEnv[cmd.Name+" --"+f.Names()[0]]; ok {
				want = r.env
				renamed[cmd.Name+" --"+f.Names()[0]] = true
			}
			if len(envs) == 0 || envs[0] != want {
				t.Errorf("%s --%s: environment %v, want %s first", cmd.Name, f.Names()[0], envs, want)
			}
		}
	}
	for name := range renamedEnv {
		if !renamed[name] {
			t.Errorf("renamedEnv names %s, which no command has", name)
		}
	}
}

// sharedEnv are the environment variables that flags of one name read with different
// defaults, each with why that is still one meaning. A variable is never shared by flags that
// mean different things: one of them reads a variable of its own (renamedEnv) or none (noEnv).
var sharedEnv = map[string]string{
	"VMC_LOG_FORMAT": "the format of the log; each command has its default (webhook logs JSON)",
}

// TestEnvOneMeaning: an environment variable that several commands read (those of the
// vm-controller binary, and the kubectl plugin's verbs) is read by flags of one name and one
// default, so that an environment set for one command (run) does not change what another
// (plan, manifests) does with the same words meaning something else. sharedEnv lists the
// variables whose flags differ only in their default, with why.
func TestEnvOneMeaning(t *testing.T) {
	type reader struct{ command, flag, def string }
	readers := map[string][]reader{}
	for prog, cmds := range map[string][]*cli.Command{"vm-controller": App("").Commands, "kubectl vm": Plugin("").Commands} {
		for _, cmd := range cmds {
			for _, f := range cmd.Flags {
				df, ok := f.(cli.DocGenerationFlag)
				if !ok {
					continue
				}
				for _, e := range df.GetEnvVars() {
					readers[e] = append(readers[e], reader{prog + " " + cmd.Name, f.Names()[0], flagDefault(t, f)})
				}
			}
		}
	}
	for e, rs := range readers {
		if _, ok := sharedEnv[e]; ok {
			continue
		}
		for _, r := range rs[1:] {
			if r.flag != rs[0].flag || r.def != rs[0].def {
				t.Errorf("%s: %s --%s (default %s) and %s --%s (default %s) read it; want one flag with one default",
					e, rs[0].command, rs[0].flag, orNone(rs[0].def), r.command, r.flag, orNone(r.def))
			}
		}
	}
}

// orNone is a flag's default as flagDefault renders it, or "none".
func orNone(def string) string {
	if def == "" {
		return "none"
	}
	return def
}
