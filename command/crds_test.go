package command

import "testing"

func TestCRDsConfigValidate(t *testing.T) {
	tests := map[string]validateCase{
		"plain":                   {},
		"webhook":                 {args: []string{"--conversion", "webhook", "--namespace", "ops", "--storage-version", "v1"}},
		"plain stores v1alpha1":   {args: []string{"--storage-version", "v1alpha1"}},
		"unknown conversion":      {[]string{"--conversion", "Webhook"}, "--conversion", `--conversion "Webhook": want none or webhook`},
		"storage v1 without it":   {[]string{"--storage-version", "v1"}, "--storage-version", "--storage-version v1 needs --conversion webhook: the plain CRD stores v1alpha1"},
		"unknown storage version": {[]string{"--conversion", "webhook", "--storage-version", "v2"}, "--storage-version", `--storage-version "v2": want one of v1alpha1, v1beta1, v1`},
		"stores v1beta1":          {args: []string{"--conversion", "webhook", "--storage-version", "v1beta1"}},
		"webhook no namespace":    {[]string{"--conversion", "webhook", "--namespace", ""}, "--namespace", "--conversion webhook needs --namespace, the webhook Service's"},
		// As manifests refuses it; it was written into the conversion's Service.
		"webhook, a bad namespace": {[]string{"--conversion", "webhook", "--namespace", "Bad_NS"}, "--namespace",
			`--namespace "Bad_NS": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &crdsConfig{}
		parseFlags(t, crdsCommand(c), args...)
		return c.Validate()
	})
}
