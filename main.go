// Command vm-controller runs the VirtualMachine controller: it keeps a server (by default a
// Pod) running for every VirtualMachine whose action is active, and keeps its status true.
//
// main stays thin: it builds the command line (package command), runs it, and turns an error
// into one line on stderr and the exit code. The commands are in command/, the work in
// reconcile/.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/cloudnative-czs/vm-controller/command"
)

// version is set at build time with -ldflags "-X main.version=..."; otherwise the module
// version recorded by go install is used (command.App).
var version = ""

func main() {
	if err := command.App(version).Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "vm-controller: %v\n", err)
		var ee cli.ExitCoder
		if errors.As(err, &ee) {
			os.Exit(ee.ExitCode())
		}
		os.Exit(1)
	}
}
