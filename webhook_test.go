package main

import (
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

func TestWebhookConfigValidate(t *testing.T) {
	ok := func() webhookConfig {
		return webhookConfig{Listen: ":9443", Namespace: "ops", Secret: "s", CAValidity: 365 * 24 * time.Hour, CertValidity: 30 * 24 * time.Hour, LogLevel: "info"}
	}
	for name, tc := range map[string]struct {
		edit func(*webhookConfig)
		want string // the error; empty: valid
	}{
		"self-managed": {func(*webhookConfig) {}, ""},
		"files": {func(c *webhookConfig) {
			c.TLSCertFile, c.TLSKeyFile, c.Namespace, c.CertValidity = "c.pem", "k.pem", "", 0
		}, ""},
		"cert without key": {func(c *webhookConfig) { c.TLSCertFile = "c.pem" }, "--tls-cert-file and --tls-key-file go together"},
		"no listen":        {func(c *webhookConfig) { c.Listen = "" }, "--listen is empty"},
		"no namespace":     {func(c *webhookConfig) { c.Namespace = "" }, "self-managed certificates need --namespace and --secret"},
		"cert outlives CA": {func(c *webhookConfig) { c.CertValidity = 400 * 24 * time.Hour }, "want 0 < --cert-validity (9600h0m0s) <= --ca-validity (8760h0m0s)"},
		"log level debug":  {func(c *webhookConfig) { c.LogLevel = "debug" }, ""},
		"log level":        {func(c *webhookConfig) { c.LogLevel = "loud" }, `--log-level "loud": want debug, info, warn or error`},
		"field maps": {func(c *webhookConfig) {
			c.FieldMaps = *cli.NewStringSlice("compute.example.org/v1=map.yaml", "v1=map.yaml", "x.org/v1")
		},
			"--field-map \"v1=map.yaml\": want group/version=file\n--field-map \"x.org/v1\": want group/version=file"},
	} {
		t.Run(name, func(t *testing.T) {
			c := ok()
			tc.edit(&c)
			err := c.Validate()
			if got := errString(err); got != tc.want {
				t.Errorf("error %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCRDsConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  crdsConfig
		want string
	}{
		"plain":                 {crdsConfig{Conversion: "none"}, ""},
		"webhook":               {crdsConfig{Conversion: "webhook", Namespace: "ops", StorageVersion: "v1"}, ""},
		"unknown conversion":    {crdsConfig{Conversion: "Webhook"}, `--conversion "Webhook": want none or webhook`},
		"storage v1 without it": {crdsConfig{Conversion: "none", StorageVersion: "v1"}, "--storage-version v1 needs --conversion webhook: the plain CRD stores v1alpha1"},
		"webhook no namespace":  {crdsConfig{Conversion: "webhook"}, "--conversion webhook needs --namespace, the webhook Service's"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := errString(tc.cfg.Validate()); got != tc.want {
				t.Errorf("error %q, want %q", got, tc.want)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
