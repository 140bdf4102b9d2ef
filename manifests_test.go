package main

import "testing"

// TestManifestsConversion: --conversion webhook renders this project's CRD with v1, so it
// refuses another group; v1 is only served by that form.
func TestManifestsConversion(t *testing.T) {
	tests := map[string]validateCase{
		"webhook":            {args: []string{"--conversion", "webhook"}},
		"webhook on v1":      {args: []string{"--conversion", "webhook", "--api-version", "cloudnative.czs/v1"}},
		"v1 without webhook": {[]string{"--api-version", "cloudnative.czs/v1"}, "--conversion", "--api-version cloudnative.czs/v1 needs --conversion webhook: the plain CRD does not serve v1"},
		"another group":      {[]string{"--conversion", "webhook", "--api-version", "compute.example.org/v1"}, "--conversion", "--conversion webhook renders the CRD of cloudnative.czs; the CRD of compute.example.org is its owner's to ship"},
		"no webhook replica": {[]string{"--conversion", "webhook", "--webhook-replicas", "0"}, "--webhook-replicas", "--webhook-replicas must be at least 1, got 0"},
		"unknown":            {[]string{"--conversion", "Webhook"}, "--conversion", `--conversion "Webhook": want none or webhook`},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &manifestsConfig{}
		parseFlags(t, manifestsCommand(c), args...)
		return c.Validate()
	})
}
