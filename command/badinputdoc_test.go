package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadInputQuotesTheFlagRefusals: each refusal of a command's flags that
// docs/reference/bad-input.md quotes in its table of flags (exit code 2) is there as the
// command prints it. Each case runs vm-controller with the bad flag and checks that the
// quote, where "..." stands for any text, matches the end of its one line. The page lacked a
// row for some of them (check --service-account, manifests --resource, crds without
// --namespace, webhook --listen...), which is what the table is for.
func TestBadInputQuotesTheFlagRefusals(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "reference", "bad-input.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := strings.Join(strings.Fields(string(b)), " ")
	tests := map[string]struct {
		args  []string
		quote string // as the page has it, its line breaks as spaces
	}{
		"check --service-account without a slash": {[]string{"check", "--service-account", "vm-controller"},
			`--service-account "vm-controller": want NAMESPACE/NAME, such as vm-controller/vm-controller`},
		"check --service-account namespace": {[]string{"check", "--service-account", "VMs/vm-controller"},
			`--service-account "VMs/vm-controller": namespace: a lowercase RFC 1123 label must consist of ...`},
		"check --service-account name": {[]string{"check", "--service-account", "vms/a/b"}, "name: a lowercase RFC 1123 subdomain ..."},
		"check --namespace":            {[]string{"check", "--namespace", "A_B"}, `--namespace "A_B": a lowercase RFC 1123 label must consist of ...`},
		"manifests --watch-namespace": {[]string{"manifests", "--watch-namespace", "A_B"},
			`"A_B": a lowercase RFC 1123 label must consist of ...`},
		"run --resize":            {[]string{"run", "--resize", "hotplug"}, `--resize "hotplug": want in-place, replace or manual`},
		"run --stalled-after":     {[]string{"run", "--stalled-after", "-1m"}, "--stalled-after must not be negative, got -1m0s"},
		"run --reconcile-timeout": {[]string{"run", "--reconcile-timeout", "0"}, "--reconcile-timeout must be at least 1s, got 0s"},
		"manifests --resource": {[]string{"manifests", "--resource", "vms"},
			"--resource vms: the CRD manifests ships for cloudnative.czs (virtualmachines.cloudnative.czs) serves virtualmachines: give --resource virtualmachines; ..."},
		"manifests v1 without webhook": {[]string{"manifests", "--api-version", "cloudnative.czs/v1"},
			"--api-version cloudnative.czs/v1 needs --conversion webhook: the plain CRD does not serve v1"},
		"manifests webhook of another group": {[]string{"manifests", "--conversion", "webhook", "--api-version", "compute.example.org/v1"},
			"--conversion webhook renders the CRD of cloudnative.czs; the CRD of compute.example.org is its owner's to ship"},
		"crds webhook without a namespace": {[]string{"crds", "--conversion", "webhook", "--namespace", ""},
			"--conversion webhook needs --namespace, the webhook Service's"},
		"webhook --listen":         {[]string{"webhook", "--listen", ""}, "--listen is empty"},
		"webhook without a secret": {[]string{"webhook", "--secret", ""}, "self-managed certificates need --namespace and --secret"},
		"webhook --shutdown-delay": {[]string{"webhook", "--shutdown-delay", "-1s"}, "--shutdown-delay must be at least 0 and at most 8760h0m0s, got -1s"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(page, tc.quote) {
				t.Errorf("docs/reference/bad-input.md does not quote %q", tc.quote)
			}
			stdout, stderr, code := runMain(t, tc.args...)
			line := strings.TrimSuffix(stderr, "\n")
			if code != 2 || stdout != "" || strings.Contains(line, "\n") || !quotes(tc.quote).MatchString(line) {
				t.Errorf("exit code %d, stderr %q, %d bytes printed; want exit code 2 and one line the page quotes as %q", code, stderr, len(stdout), tc.quote)
			}
		})
	}
}
