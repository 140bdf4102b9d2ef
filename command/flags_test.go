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

// TestFlagsHaveEnv: every flag of every command can be set by its environment variable,
// VMC_ and the flag's name in upper snake case, read before any other it has.
func TestFlagsHaveEnv(t *testing.T) {
	for _, cmd := range App("").Commands {
		for _, f := range cmd.Flags {
			df, ok := f.(cli.DocGenerationFlag)
			if !ok {
				t.Errorf("%s --%s: no environment variable to read", cmd.Name, f.Names()[0])
				continue
			}
			want := "VMC_" + strings.ToUpper(strings.ReplaceAll(f.Names()[0], "-", "_"))
			if envs := df.GetEnvVars(); len(envs) == 0 || envs[0] != want {
				t.Errorf("%s --%s: environment %v, want %s first", cmd.Name, f.Names()[0], envs, want)
			}
		}
	}
}
