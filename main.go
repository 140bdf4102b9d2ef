// Command vm-controller runs the VirtualMachine controller: it keeps a server (by default a
// Pod) running for every VirtualMachine whose action is active, and keeps its status true.
//
// main stays thin: flags, configuration, construction, signals. The work is in reconcile/.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=..."; otherwise the module
// version recorded by go install is used.
var version = ""

func main() {
	if err := app().Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "vm-controller: %v\n", err)
		var ee cli.ExitCoder
		if errors.As(err, &ee) {
			os.Exit(ee.ExitCode())
		}
		os.Exit(1)
	}
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func app() *cli.App {
	return &cli.App{
		Name:    "vm-controller",
		Usage:   "keep a server running for every VirtualMachine custom resource",
		Version: buildVersion(),
		Commands: []*cli.Command{
			// Each command fills a configuration of its own, new for every app.
			runCommand(&runConfig{}),
			checkCommand(&checkConfig{}),
			planCommand(&planConfig{}),
			manifestsCommand(&manifestsConfig{}),
			crdsCommand(),
			webhookCommand(),
			migrateCommand(),
		},
		OnUsageError:    usageError,
		HideHelpCommand: true,
		// An unknown command is a usage error: one line and exit 2, like a bad flag.
		CommandNotFound: func(_ *cli.Context, name string) {
			fmt.Fprintf(os.Stderr, "vm-controller: no command %q (see --help)\n", name)
			os.Exit(2)
		},
		ExitErrHandler: func(*cli.Context, error) {}, // main prints and exits
	}
}
