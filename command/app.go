package command

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
)

// App is vm-controller's command line. version is the build's version (main's, set with
// -ldflags); empty: the module version Go recorded (go install), else (devel). Every command
// is built the same way, from a configuration of its own, new for every app.
func App(version string) *cli.App {
	version = buildVersion(version)
	return &cli.App{
		Name:  "vm-controller",
		Usage: "keep a server running for every VirtualMachine custom resource",
		Description: "To start, stop, restart, wait for, inspect or migrate one VM, use the kubectl plugin, this binary as kubectl-vm: " +
			"kubectl vm start|stop|restart|wait|status|migrate NAME (docs/run-strategies.md).",
		Version: version,
		Commands: []*cli.Command{
			runCommand(&runConfig{}),
			checkCommand(&checkConfig{}),
			planCommand(&planConfig{}),
			// The default --image is this build's own.
			manifestsCommand(&manifestsConfig{}, version),
			crdsCommand(&crdsConfig{}),
			webhookCommand(&webhookConfig{}),
			migrateCommand(&migrateConfig{}),
		},
		// Without a command: the help; with an argument that names none, a usage error, so
		// that main prints it and exits like for a bad flag. A verb of the kubectl plugin
		// (vm-controller start test-vm) is named as the plugin's command line.
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.ShowAppHelp(c)
			}
			if word := c.Args().First(); isPluginVerb(word) {
				return cli.Exit(fmt.Sprintf("no command %q: %s is a verb of the kubectl plugin: kubectl vm %s", word, word,
					strings.Join(c.Args().Slice(), " ")), 2)
			}
			return cli.Exit(fmt.Sprintf("no command %q (see --help)", c.Args().First()), 2)
		},
		OnUsageError:    usageError,
		HideHelpCommand: true,
		ExitErrHandler:  func(*cli.Context, error) {}, // main prints and exits
	}
}

// isPluginVerb reports whether word is a verb of the kubectl plugin (Plugin's commands: start,
// stop, restart, wait, status, migrate).
func isPluginVerb(word string) bool {
	for _, c := range Plugin("").Commands {
		if c.Name == word {
			return true
		}
	}
	return false
}

// buildVersion is version, else the module version Go recorded, else (devel).
func buildVersion(version string) string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// validator is a command's configuration: Validate checks what can be checked without
// reading a file or asking the cluster, and each error names its flag.
type validator interface{ Validate() error }

// action is the Action of every command, in one shape: refuse the arguments the command does
// not take (args: noArgs, or the command's own rule), check the configuration, then do the
// work. A bad argument or configuration is a usage error: one line (the problems Validate
// joins, separated by semicolons) and exit code 2.
func action(c validator, args func(*cli.Context) error, do func(*cli.Context) error) cli.ActionFunc {
	return func(cc *cli.Context) error {
		if err := args(cc); err != nil {
			return err
		}
		if err := c.Validate(); err != nil {
			return cli.Exit(strings.ReplaceAll(err.Error(), "\n", "; "), 2)
		}
		return do(cc)
	}
}

// noArgs refuses arguments to a command that takes none, as a usage error. A command named
// as a verb of the kubectl plugin (migrate: the storage version's, of every VM) given a name
// was likely meant as the verb, and the error says so.
func noArgs(c *cli.Context) error {
	if c.NArg() == 0 {
		return nil
	}
	msg := fmt.Sprintf("%s takes no arguments, got %q (see --help)", c.Command.Name, c.Args().Slice())
	if isPluginVerb(c.Command.Name) {
		msg += fmt.Sprintf("; for the kubectl plugin's verb: kubectl vm %s %s", c.Command.Name, strings.Join(c.Args().Slice(), " "))
	}
	return cli.Exit(msg, 2)
}

// usageError turns a flag problem into one line and exit code 2, instead of a page of help.
func usageError(_ *cli.Context, err error, _ bool) error {
	return cli.Exit(fmt.Sprintf("%v (see --help)", err), 2)
}
