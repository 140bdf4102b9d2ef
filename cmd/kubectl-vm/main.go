// Command kubectl-vm is vm-controller's kubectl plugin: `kubectl vm start|stop|restart|wait|
// status|migrate NAME`, for `go install .../cmd/kubectl-vm`. It is the plugin half of the
// vm-controller binary (which is the plugin too when it is called kubectl-vm); the verbs live
// in package command.
package main

import (
	"os"

	"github.com/cloudnative-czs/vm-controller/command"
)

// version is set at build time with -ldflags "-X main.version=..."; otherwise the module
// version recorded by go install is used.
var version = ""

func main() {
	os.Exit(command.RunMain(command.Plugin(version), "kubectl vm", command.PluginArgs(os.Args), os.Stderr))
}
