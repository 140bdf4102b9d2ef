package command

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/internal/golden"

	"github.com/urfave/cli/v2"
)

// flagsDoc is the flag reference, docs/reference/flags.md.
var flagsDoc = filepath.Join("..", "docs", "reference", "flags.md")

// TestFlagsDoc renders the flag reference from the commands' own flag declarations and
// fails when docs/reference/flags.md says something else, so the reference cannot drift from
// the binary. With -update it rewrites the file.
func TestFlagsDoc(t *testing.T) {
	got := renderFlagsDoc(t, App(""))
	golden.Check(t, flagsDoc, got)
}

// TestFlagsDocIgnoresEnvironment renders the reference with every variable a flag reads set
// (and those of a pod's downward API), and without any: a default taken from the
// environment would make the reference, and --help, depend on where they were made.
func TestFlagsDocIgnoresEnvironment(t *testing.T) {
	names := []string{"POD_NAME", "POD_NAMESPACE"}
	for _, cmd := range App("").Commands {
		for _, f := range cmd.Flags {
			if df, ok := f.(cli.DocGenerationFlag); ok {
				names = append(names, df.GetEnvVars()...)
			}
		}
	}
	for _, name := range names {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	without := renderFlagsDoc(t, App(""))
	for _, name := range names {
		t.Setenv(name, "from-the-environment")
	}
	if with := renderFlagsDoc(t, App("")); !bytes.Equal(with, without) {
		t.Errorf("the flag reference depends on the environment; with %s set it reads\n%s", strings.Join(names, ", "), with)
	}
}

// TestFlagUsageHasNoBackquotes: urfave/cli takes a backquoted word of a flag's usage for the
// placeholder of its value (--conversion `vm-controller webhook`) and drops the quotes from
// the usage, so --help would read wrong.
func TestFlagUsageHasNoBackquotes(t *testing.T) {
	for _, cmd := range App("").Commands {
		for _, f := range cmd.Flags {
			if df, ok := f.(cli.DocGenerationFlag); ok && strings.Contains(df.GetUsage(), "`") {
				t.Errorf("%s --%s: usage %q has a backquote", cmd.Name, f.Names()[0], df.GetUsage())
			}
		}
	}
}

// renderFlagsDoc writes one section per command: what it does, and a table of its flags with
// their environment variables, defaults and usage, in the order of --help.
func renderFlagsDoc(t *testing.T, a *cli.App) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("# Flag reference\n\n")
	b.WriteString("<!-- Generated from the flag declarations by `go test ./command -run TestFlagsDoc -update`; do not edit. -->\n\n")
	b.WriteString("Every command of `vm-controller` and every flag it takes. A flag's environment variable sets it\n" +
		"when the flag is not given on the command line; a variable means the same to every command that\n" +
		"reads it. So the `--namespace` of `manifests`, `crds` and `webhook`, the namespace vm-controller is\n" +
		"installed in, reads `" + installNamespaceEnv + "`: `VMC_NAMESPACE` is the VMs' namespace, `run`'s and\n" +
		"`check`'s, and the install commands no longer read it (they warn when it is set and would have\n" +
		"given another namespace). `vm-controller COMMAND --help` prints the same;\n" +
		"`vm-controller --version` prints the version. A duration flag of `run` and `plan` is at most\n" +
		"8760h (a year); [bad input](bad-input.md) lists what each command refuses.\n")
	commands := func(prog string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			renderCommandDoc(t, &b, prog, cmd)
		}
	}
	commands("vm-controller", a.Commands)
	b.WriteString("\nThe kubectl plugin (`kubectl-vm`, the same binary under that name; [run strategies](../run-strategies.md)): its\n" +
		"verbs take the VM's name and, as kubectl does, their flags before or after it, or before the verb (`kubectl vm -n NS stop NAME`).\n")
	commands("kubectl vm", Plugin("").Commands)
	return b.Bytes()
}

// renderCommandDoc writes the section of one command of prog.
func renderCommandDoc(t *testing.T, b *bytes.Buffer, prog string, cmd *cli.Command) {
	t.Helper()
	fmt.Fprintf(b, "\n## %s %s\n\n", prog, cmd.Name)
	if cmd.ArgsUsage != "" {
		fmt.Fprintf(b, "`%s %s [flags] %s`\n\n", prog, cmd.Name, cmd.ArgsUsage)
	}
	fmt.Fprintf(b, "%s.\n", upperFirst(cmd.Usage))
	if cmd.Description != "" {
		fmt.Fprintf(b, "\n%s\n", strings.ReplaceAll(cmd.Description, "\n", " "))
	}
	if len(cmd.Flags) == 0 {
		b.WriteString("\nNo flags.\n")
		return
	}
	b.WriteString("\n| Flag | Environment | Default | Usage |\n| --- | --- | --- | --- |\n")
	for _, f := range cmd.Flags {
		df, ok := f.(cli.DocGenerationFlag)
		if !ok {
			t.Fatalf("%s: flag %v has no usage to document", cmd.Name, f.Names())
		}
		var envs []string
		for _, e := range df.GetEnvVars() {
			envs = append(envs, "`"+e+"`")
		}
		fmt.Fprintf(b, "| `--%s` | %s | %s | %s |\n", f.Names()[0], strings.Join(envs, ", "),
			cell(flagDefault(t, f)), cell(df.GetUsage()))
	}
}

// flagDefault is a flag's declared default as a user would type it; "" when it has none.
func flagDefault(t *testing.T, f cli.Flag) string {
	t.Helper()
	switch f := f.(type) {
	case *cli.StringFlag:
		if f.Value == "" {
			return ""
		}
		return "`" + f.Value + "`"
	case *cli.BoolFlag:
		return "`" + strconv.FormatBool(f.Value) + "`"
	case *cli.IntFlag:
		return "`" + strconv.Itoa(f.Value) + "`"
	case *cli.Float64Flag:
		return "`" + strconv.FormatFloat(f.Value, 'g', -1, 64) + "`"
	case *cli.DurationFlag:
		return "`" + f.Value.String() + "`"
	case *cli.Int64Flag:
		return "`" + strconv.FormatInt(f.Value, 10) + "`"
	case *cli.StringSliceFlag:
		if f.Value == nil || len(f.Value.Value()) == 0 {
			return ""
		}
		return "`" + strings.Join(f.Value.Value(), ",") + "`"
	}
	t.Fatalf("flag %v: no default rendering for %T", f.Names(), f)
	return ""
}

// cell keeps text inside one Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
