package command

import (
	"bytes"
	"strings"
	"testing"
)

// TestAppUnknownCommand: a word that names no command is one line and exit 2; a verb of the
// kubectl plugin (vm-controller start test-vm) is named as the plugin's command line, and so
// is migrate given a name (vm-controller's migrate is the storage version's, and takes none).
func TestAppUnknownCommand(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string // the line on stderr
	}{
		"a typo":         {[]string{"rnu"}, `vm-controller: no command "rnu" (see --help)`},
		"a plugin verb":  {[]string{"start", "test-vm"}, `vm-controller: no command "start": start is a verb of the kubectl plugin: kubectl vm start test-vm`},
		"with its flags": {[]string{"wait", "test-vm", "--for=phase=Active"}, `vm-controller: no command "wait": wait is a verb of the kubectl plugin: kubectl vm wait test-vm --for=phase=Active`},
		"status":         {[]string{"status", "x"}, `vm-controller: no command "status": status is a verb of the kubectl plugin: kubectl vm status x`},
		// migrate is vm-controller's command of the storage version, which takes no name.
		"migrate with a name": {[]string{"migrate", "test-vm"},
			`vm-controller: migrate takes no arguments, got ["test-vm"] (see --help); for the kubectl plugin's verb: kubectl vm migrate test-vm`},
		"run with an argument": {[]string{"run", "extra"}, `vm-controller: run takes no arguments, got ["extra"] (see --help)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := RunMain(App(""), "vm-controller", append([]string{"vm-controller"}, tc.args...), &stderr)
			if got := strings.TrimSuffix(stderr.String(), "\n"); code != 2 || got != tc.want {
				t.Errorf("exit %d, %q; want exit 2, %q", code, got, tc.want)
			}
		})
	}
}

// TestAppHelpNamesThePlugin: vm-controller --help points at kubectl vm for the verbs on one VM.
func TestAppHelpNamesThePlugin(t *testing.T) {
	app := App("")
	var out bytes.Buffer
	app.Writer = &out
	if err := app.Run([]string{"vm-controller", "--help"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "kubectl vm start|stop|restart|wait|status|migrate NAME") {
		t.Errorf("--help does not name the kubectl plugin:\n%s", out.String())
	}
}
