package command

import "testing"

func TestCheckConfigValidate(t *testing.T) {
	tests := map[string]validateCase{
		"defaults":    {},
		"api version": {[]string{"--api-version", "v1"}, "api version", `api version "v1": want group/version, such as cloudnative.czs/v1alpha1`},
		"root disk":   {[]string{"--root-disk", "pvc"}, "--root-disk", `--root-disk "pvc": want claim or ephemeral`},
		"ephemeral":   {args: []string{"--root-disk", "ephemeral"}},
		"a version without a map": {[]string{"--api-version", "cloudnative.czs/v9"}, "--api-version",
			`--api-version cloudnative.czs/v9: no built-in field map for version "v9" of cloudnative.czs (built in: v1, v1alpha1, v1beta1)`},
		"namespace": {[]string{"--namespace", "A_B"}, "--namespace", `--namespace "A_B": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &checkConfig{}
		parseFlags(t, checkCommand(c), args...)
		return c.Validate()
	})
}
