package command

import "testing"

func TestWebhookConfigValidate(t *testing.T) {
	tests := map[string]validateCase{
		"self-managed":     {},
		"files":            {args: []string{"--tls-cert-file", "c.pem", "--tls-key-file", "k.pem", "--namespace", "", "--cert-validity", "0"}},
		"field maps":       {args: []string{"--field-map", "compute.example.org/v1=map.yaml"}},
		"log level debug":  {args: []string{"--log-level", "debug"}},
		"text logs":        {args: []string{"--log-format", "text"}},
		"larger reviews":   {args: []string{"--max-review-bytes", "268435456", "--max-review-bytes-in-flight", "536870912"}},
		"one at a time":    {args: []string{"--max-review-bytes-in-flight", "16777216"}},
		"max review bytes": {[]string{"--max-review-bytes", "1000"}, "--max-review-bytes", "--max-review-bytes must be at least 1 MiB (1048576), got 1000"},
		"largest reviews":  {args: []string{"--max-review-bytes", "1073741824", "--max-review-bytes-in-flight", "2147483648"}},
		"max review bytes too large": {[]string{"--max-review-bytes", "1073741825", "--max-review-bytes-in-flight", "2147483648"}, "--max-review-bytes",
			"--max-review-bytes must be at most 1 GiB (1073741824), got 1073741825"},
		"max review bytes of 16 GiB": {[]string{"--max-review-bytes", "17179869184", "--max-review-bytes-in-flight", "34359738368"}, "--max-review-bytes",
			"--max-review-bytes must be at most 1 GiB (1073741824), got 17179869184"},
		"max review bytes as large as int64": {[]string{"--max-review-bytes", "9223372036854775807", "--max-review-bytes-in-flight", "9223372036854775807"}, "--max-review-bytes",
			"--max-review-bytes must be at most 1 GiB (1073741824), got 9223372036854775807"},
		"review larger than in flight": {[]string{"--max-review-bytes", "268435456"}, "--max-review-bytes-in-flight",
			"--max-review-bytes-in-flight (33554432) must be at least --max-review-bytes (268435456)"},
		"slower bodies": {args: []string{"--review-body-timeout", "29s"}},
		"body timeout too short": {[]string{"--review-body-timeout", "500ms"}, "--review-body-timeout",
			"--review-body-timeout must be at least 1s and under 30s, got 500ms"},
		"body timeout as long as the wait": {[]string{"--review-body-timeout", "30s"}, "--review-body-timeout",
			"--review-body-timeout must be at least 1s and under 30s, got 30s"},
		"cert without key": {[]string{"--tls-cert-file", "c.pem"}, "--tls-key-file", "--tls-cert-file and --tls-key-file go together"},
		"no listen":        {[]string{"--listen", ""}, "--listen", "--listen is empty"},
		"no namespace":     {[]string{"--namespace", ""}, "--namespace", "self-managed certificates need --namespace and --secret"},
		"no secret":        {[]string{"--secret", ""}, "--secret", "self-managed certificates need --namespace and --secret"},
		"cert outlives CA": {[]string{"--cert-validity", "9600h"}, "--cert-validity", "want 1h <= --cert-validity (9600h0m0s) <= --ca-validity (8760h0m0s)"},
		"cert too short":   {[]string{"--cert-validity", "29ns"}, "--cert-validity", "want 1h <= --cert-validity (29ns) <= --ca-validity (8760h0m0s)"},
		"log level":        {[]string{"--log-level", "loud"}, "--log-level", `--log-level "loud": want debug, info, warn or error`},
		"log format":       {[]string{"--log-format", "xml"}, "--log-format", `--log-format "xml": want text or json`},
		"bad field maps": {[]string{"--field-map", "compute.example.org/v1=map.yaml", "--field-map", "v1=map.yaml", "--field-map", "x.org/v1"}, "--field-map",
			"--field-map \"v1=map.yaml\": want group/version=file\n--field-map \"x.org/v1\": want group/version=file"},
		// As manifests and crds refuse it; a Secret was read in it.
		"bad namespace": {[]string{"--namespace", "Bad_NS"}, "--namespace",
			`--namespace "Bad_NS": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		"every problem at once": {[]string{"--listen", "", "--log-level", "loud"}, "--listen",
			"--listen is empty\n--log-level \"loud\": want debug, info, warn or error"},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &webhookConfig{}
		parseFlags(t, webhookCommand(c), args...)
		return c.Validate()
	})
}
