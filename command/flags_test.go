package command

import (
	"bytes"
	"flag"
	"math"
	"os"
	"strings"
	"testing"
	"time"

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

// TestSharedChecksNameTheVariable: the checks that several commands share (flags.go, log.go)
// and check's own name a flag's environment variable when the refused value came from it,
// as run's Validate does (flagRef): "--root-disk "tmpfs"" named a flag the user never typed.
// A value the command line gave names the flag alone, and so does a flag that reads another
// variable than its name gives (the install commands' --namespace).
func TestSharedChecksNameTheVariable(t *testing.T) {
	tests := map[string]struct {
		env  map[string]string
		args []string // the command and its flags
		want string   // the beginning of the one line on stderr, after "vm-controller: "
	}{
		"log level":            {map[string]string{"VMC_LOG_LEVEL": "loud"}, []string{"run"}, `--log-level (from VMC_LOG_LEVEL) "loud": want debug, info, warn or error`},
		"log level of migrate": {map[string]string{"VMC_LOG_LEVEL": "loud"}, []string{"migrate"}, `--log-level (from VMC_LOG_LEVEL) "loud": want debug, info, warn or error`},
		"log format":           {map[string]string{"VMC_LOG_FORMAT": "xml"}, []string{"run"}, `--log-format (from VMC_LOG_FORMAT) "xml": want text or json`},
		"log level on the command line": {map[string]string{"VMC_LOG_LEVEL": "debug"}, []string{"run", "--log-level", "loud"},
			`--log-level "loud": want debug, info, warn or error`},
		"namespace":       {map[string]string{"VMC_NAMESPACE": "Bad"}, []string{"check"}, `--namespace (from VMC_NAMESPACE) "Bad": a lowercase RFC 1123 label`},
		"lease namespace": {map[string]string{"VMC_LEASE_NAMESPACE": "Bad"}, []string{"run"}, `--lease-namespace (from VMC_LEASE_NAMESPACE) "Bad": a lowercase RFC 1123 label`},
		"install namespace, another variable": {map[string]string{"VMC_NAMESPACE": "Bad"}, []string{"manifests", "--namespace", "Bad"},
			`--namespace "Bad": a lowercase RFC 1123 label`},
		"api version": {map[string]string{"VMC_API_VERSION": "cloudnative.czs/v9"}, []string{"check"},
			`--api-version (from VMC_API_VERSION) cloudnative.czs/v9: no built-in field map for version "v9"`},
		"api version of manifests": {map[string]string{"VMC_API_VERSION": "cloudnative.czs/v9"}, []string{"manifests"},
			`--api-version (from VMC_API_VERSION) cloudnative.czs/v9: no built-in field map for version "v9"`},
		"api version on the command line": {map[string]string{"VMC_API_VERSION": "cloudnative.czs/v1"}, []string{"run", "--api-version", "cloudnative.czs/v9"},
			`--api-version cloudnative.czs/v9: no built-in field map for version "v9"`},
		"selector": {map[string]string{"VMC_SELECTOR": "a in"}, []string{"manifests"}, `--selector (from VMC_SELECTOR): `},
		"restart backoff": {map[string]string{"VMC_RESTART_BACKOFF": "0s"}, []string{"run"},
			`--restart-backoff (from VMC_RESTART_BACKOFF) must be positive and at most --max-restart-backoff`},
		"max restart backoff past a year": {map[string]string{"VMC_MAX_RESTART_BACKOFF": "9000h"}, []string{"run"},
			`--max-restart-backoff (from VMC_MAX_RESTART_BACKOFF) must be at most 8760h0m0s, got 9000h0m0s`},
		"max restart backoff past a year on the command line": {nil, []string{"run", "--max-restart-backoff", "9000h"},
			`--max-restart-backoff must be at most 8760h0m0s, got 9000h0m0s`},
		"stalled after":                       {map[string]string{"VMC_STALLED_AFTER": "-1s"}, []string{"run"}, `--stalled-after (from VMC_STALLED_AFTER) must not be negative, got -1s`},
		"server image":                        {map[string]string{"VMC_SERVER_IMAGE": ""}, []string{"manifests"}, `--server-image (from VMC_SERVER_IMAGE) must not be empty`},
		"server pod security":                 {map[string]string{"VMC_SERVER_POD_SECURITY": "baseline"}, []string{"run"}, `--server-pod-security (from VMC_SERVER_POD_SECURITY) "baseline": want none or restricted`},
		"resize":                              {map[string]string{"VMC_RESIZE": "sometimes"}, []string{"run"}, `--resize (from VMC_RESIZE) "sometimes": want in-place, replace or manual`},
		"resize on the command line":          {map[string]string{"VMC_RESIZE": "replace"}, []string{"run", "--resize", "sometimes"}, `--resize "sometimes": want in-place, replace or manual`},
		"eviction strategy":                   {map[string]string{"VMC_EVICTION_STRATEGY": "Never"}, []string{"run"}, `--eviction-strategy (from VMC_EVICTION_STRATEGY) "Never": want None, Replace or Block`},
		"root disk":                           {map[string]string{"VMC_ROOT_DISK": "tmpfs"}, []string{"check"}, `--root-disk (from VMC_ROOT_DISK) "tmpfs": want claim or ephemeral`},
		"conversion":                          {map[string]string{"VMC_CONVERSION": "always"}, []string{"crds"}, `--conversion (from VMC_CONVERSION) "always": want none or webhook`},
		"service account":                     {map[string]string{"VMC_SERVICE_ACCOUNT": "nobody"}, []string{"check"}, `--service-account (from VMC_SERVICE_ACCOUNT) "nobody": want NAMESPACE/NAME`},
		"service account namespace":           {map[string]string{"VMC_SERVICE_ACCOUNT": "Bad/x"}, []string{"check"}, `--service-account (from VMC_SERVICE_ACCOUNT) "Bad/x": namespace: `},
		"service account on the command line": {nil, []string{"check", "--service-account", "nobody"}, `--service-account "nobody": want NAMESPACE/NAME`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, cmd := range App("").Commands {
				for _, f := range cmd.Flags {
					if df, ok := f.(cli.DocGenerationFlag); ok {
						unsetenv(t, df.GetEnvVars()...)
					}
				}
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stderr bytes.Buffer
			code := RunMain(App(""), "vm-controller", append([]string{"vm-controller"}, tc.args...), &stderr)
			got := stderr.String()
			if code != 2 || strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "vm-controller: "+tc.want) {
				t.Errorf("exit %d, %q; want exit 2, one line beginning %q", code, got, "vm-controller: "+tc.want)
			}
		})
	}
}

// TestFlagRef: a refusal names the flag, and its variable too when the value is the
// variable's: set, and read as the flag reads it (the command line, which wins over it, gave
// none or the same).
func TestFlagRef(t *testing.T) {
	tests := map[string]struct {
		flag  string
		env   string // VMC_... of the flag; "unset" for none
		value any
		want  string
	}{
		"no variable":               {"workers", "unset", 0, "--workers"},
		"the variable's":            {"workers", "0", 0, "--workers (from VMC_WORKERS)"},
		"the command line's":        {"workers", "5", 0, "--workers"},
		"an int in another base":    {"burst", "0x0", 0, "--burst (from VMC_BURST)"},
		"a duration written apart":  {"resync", "60s", time.Minute, "--resync (from VMC_RESYNC)"},
		"another duration":          {"resync", "1m", -time.Minute, "--resync"},
		"a float":                   {"qps", "1e-50", 1e-50, "--qps (from VMC_QPS)"},
		"NaN":                       {"usage-threshold", "NaN", math.NaN(), "--usage-threshold (from VMC_USAGE_THRESHOLD)"},
		"an empty string":           {"lease-name", "", "", "--lease-name (from VMC_LEASE_NAME)"},
		"a string":                  {"events", "normal", "normal", "--events (from VMC_EVENTS)"},
		"a variable that is no int": {"workers", "abc", 0, "--workers"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			variable := "VMC_" + strings.ToUpper(strings.ReplaceAll(tc.flag, "-", "_"))
			if tc.env == "unset" {
				unsetenv(t, variable)
			} else {
				t.Setenv(variable, tc.env)
			}
			if got := flagRef(tc.flag, tc.value); got != tc.want {
				t.Errorf("flagRef(%q, %v) = %q, want %q", tc.flag, tc.value, got, tc.want)
			}
		})
	}
}
