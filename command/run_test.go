package command

import "testing"

func TestRunConfigValidate(t *testing.T) {
	tests := map[string]validateCase{
		"defaults":                     {},
		"qps 0 is no limit":            {args: []string{"--qps", "0"}},
		"a qps limit":                  {args: []string{"--qps", "50", "--burst", "100"}},
		"usage off":                    {args: []string{"--usage-interval", "0"}},
		"log level debug":              {args: []string{"--log-level", "debug"}},
		"log level":                    {[]string{"--log-level", "loud"}, "--log-level", `--log-level "loud": want debug, info, warn or error`},
		"log format":                   {[]string{"--log-format", "xml"}, "--log-format", `--log-format "xml": want text or json`},
		"api version":                  {[]string{"--api-version", "nogroup"}, "api version", `api version "nogroup": want group/version, such as cloudnative.czs/v1alpha1`},
		"resource":                     {[]string{"--resource", "Virtual.Machines"}, "resource", `resource "Virtual.Machines": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`},
		"namespace":                    {[]string{"--namespace", "Bad_NS"}, "--namespace", `--namespace "Bad_NS": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		"selector":                     {[]string{"--selector", "a in (("}, "--selector", `--selector: unable to parse requirement: found '(', expected: ',', ')' or identifier`},
		"workers":                      {[]string{"--workers", "0"}, "--workers", "--workers must be at least 1, got 0"},
		"burst":                        {[]string{"--burst", "0"}, "--burst", "--burst must be at least 1, got 0"},
		"retry burst":                  {[]string{"--retry-burst", "0"}, "--retry-burst", "--retry-burst must be at least 1, got 0"},
		"negative qps":                 {[]string{"--qps", "-1"}, "--qps", "--qps must not be negative, got -1"},
		"retry qps":                    {[]string{"--retry-qps", "0"}, "--retry-qps", "--retry-qps must be greater than 0, got 0"},
		"resync":                       {[]string{"--resync", "-1s"}, "--resync", "--resync must not be negative"},
		"events":                       {[]string{"--events", "normal"}, "--events", `--events "normal": want all or warnings`},
		"restart backoff":              {[]string{"--restart-backoff", "0"}, "--restart-backoff", "--restart-backoff must be positive and at most --max-restart-backoff"},
		"max restart backoff":          {[]string{"--restart-backoff", "10m"}, "--max-restart-backoff", "--restart-backoff must be positive and at most --max-restart-backoff"},
		"server image":                 {[]string{"--server-image", ""}, "--server-image", "--server-image must not be empty"},
		"stalled after":                {[]string{"--stalled-after", "-1m"}, "--stalled-after", "--stalled-after must not be negative, got -1m0s"},
		"never stalled":                {args: []string{"--stalled-after", "0"}},
		"resize manual":                {args: []string{"--resize", "manual"}},
		"eviction strategy Replace":    {args: []string{"--eviction-strategy", "Replace"}},
		"eviction strategy Block":      {args: []string{"--eviction-strategy", "Block"}},
		"eviction strategy":            {[]string{"--eviction-strategy", "block"}, "--eviction-strategy", `--eviction-strategy "block": want None, Replace or Block`},
		"resize":                       {[]string{"--resize", "hotplug"}, "--resize", `--resize "hotplug": want in-place, replace or manual`},
		"root disk":                    {[]string{"--root-disk", "pvc"}, "--root-disk", `--root-disk "pvc": want claim or ephemeral`},
		"ephemeral":                    {args: []string{"--root-disk", "ephemeral"}},
		"retry base delay":             {[]string{"--retry-base-delay", "0"}, "--retry-base-delay", "--retry-base-delay must be positive and at most --retry-max-delay"},
		"reconcile timeout":            {[]string{"--reconcile-timeout", "0"}, "--reconcile-timeout", "--reconcile-timeout must be at least 1s, got 0s"},
		"a longer reconcile timeout":   {args: []string{"--reconcile-timeout", "5m"}},
		"retry max delay":              {[]string{"--retry-base-delay", "2s", "--retry-max-delay", "1s"}, "--retry-max-delay", "--retry-base-delay must be positive and at most --retry-max-delay"},
		"usage interval":               {[]string{"--usage-interval", "-1s"}, "--usage-interval", "want --usage-interval >= 0, --usage-threshold >= 0 and --usage-max-interval >= --usage-interval"},
		"usage threshold":              {[]string{"--usage-threshold", "-0.1"}, "--usage-threshold", "want --usage-interval >= 0, --usage-threshold >= 0 and --usage-max-interval >= --usage-interval"},
		"usage max interval":           {[]string{"--usage-max-interval", "30s"}, "--usage-max-interval", "want --usage-interval >= 0, --usage-threshold >= 0 and --usage-max-interval >= --usage-interval"},
		"usage qps":                    {[]string{"--usage-qps", "0"}, "--usage-qps", "--usage-qps must be greater than 0 and --usage-burst at least 1"},
		"usage burst":                  {[]string{"--usage-burst", "0"}, "--usage-burst", "--usage-qps must be greater than 0 and --usage-burst at least 1"},
		"lease duration":               {[]string{"--lease-duration", "1s"}, "--lease-duration", "want --lease-duration > --renew-deadline > 1.2 x --retry-period > 0, got 1s, 10s, 500ms"},
		"renew deadline":               {[]string{"--renew-deadline", "400ms"}, "--renew-deadline", "want --lease-duration > --renew-deadline > 1.2 x --retry-period > 0, got 15s, 400ms, 500ms"},
		"retry period":                 {[]string{"--retry-period", "0"}, "--retry-period", "want --lease-duration > --renew-deadline > 1.2 x --retry-period > 0, got 15s, 10s, 0s"},
		"renew deadline in the jitter": {[]string{"--renew-deadline", "550ms"}, "--renew-deadline", "want --lease-duration > --renew-deadline > 1.2 x --retry-period > 0, got 15s, 550ms, 500ms"},
		"renew deadline past it":       {args: []string{"--renew-deadline", "601ms"}},
		"lease name":                   {[]string{"--lease-name", "Bad/Name"}, "--lease-name", "--lease-name \"Bad/Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"},
		"empty lease name":             {[]string{"--lease-name", ""}, "--lease-name", "--lease-name \"\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"},
		"lease namespace":              {[]string{"--lease-namespace", "Bad_NS"}, "--lease-namespace", "--lease-namespace \"Bad_NS\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"},
		"schema file is not read":      {args: []string{"--schema-file", "/nonexistent.yaml"}},
		"group without a map okay":     {args: []string{"--api-version", "compute.example.org/v1"}},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &runConfig{}
		parseFlags(t, runCommand(c), args...)
		return c.Validate()
	})
}
