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
		Name:    "vm-controller",
		Usage:   "keep a server running for every VirtualMachine custom resource",
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
		// that main prints it and exits like for a bad flag.
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("no command %q (see --help)", c.Args().First()), 2)
			}
			return cli.ShowAppHelp(c)
		},
		OnUsageError:    usageError,
		HideHelpCommand: true,
		ExitErrHandler:  func(*cli.Context, error) {}, // main prints and exits
	}
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

// noArgs refuses arguments to a command that takes none, as a usage error.
func noArgs(c *cli.Context) error {
	if c.NArg() > 0 {
		return cli.Exit(fmt.Sprintf("%s takes no arguments, got %q (see --help)", c.Command.Name, c.Args().Slice()), 2)
	}
	return nil
}

// usageError turns a flag problem into one line and exit code 2, instead of a page of help.
func usageError(_ *cli.Context, err error, _ bool) error {
	return cli.Exit(fmt.Sprintf("%v (see --help)", err), 2)
}
