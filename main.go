// Command vm-controller runs the VirtualMachine controller: it keeps a server (by default a
// Pod) for every VirtualMachine as its run strategy says, and keeps its status true.
//
// main stays thin: it builds the command line (package command), runs it, and turns an error
// into one line on stderr and the exit code. The commands are in command/, the work in
// reconcile/.
package main

import (
	"os"

	"github.com/cloudnative-czs/vm-controller/command"
)

// version is set at build time with -ldflags "-X main.version=..."; otherwise the module
// version recorded by go install is used (command.App).
var version = ""

// main is vm-controller, or the kubectl plugin when it is called kubectl-vm (`kubectl vm
// ...`; make build writes bin/kubectl-vm, the same binary).
func main() {
	if command.IsPlugin(os.Args[0]) {
		os.Exit(command.RunMain(command.Plugin(version), "kubectl vm", command.PluginArgs(os.Args), os.Stderr))
	}
	os.Exit(command.RunMain(command.App(version), "vm-controller", os.Args, os.Stderr))
}
