package crds

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/schema"
)

func decodeCRD(t *testing.T, data []byte) apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// TestDefaultName: DefaultName is the name the API server requires of the CRD of the default
// resource, and the name both forms of the embedded CRD carry, for the group and plural they
// declare.
func TestDefaultName(t *testing.T) {
	gvr, err := schema.ParseGVR(schema.DefaultAPIVersion, schema.DefaultResource)
	if err != nil {
		t.Fatal(err)
	}
	if want := Name(gvr); DefaultName != want {
		t.Errorf("DefaultName = %q, Name of the default resource %q", DefaultName, want)
	}
	plain, err := YAML()
	if err != nil {
		t.Fatal(err)
	}
	webhook, err := WithWebhook(Webhook{Namespace: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	for form, data := range map[string][]byte{"plain": plain, "webhook": webhook} {
		def := decodeCRD(t, data)
		if def.Name != DefaultName {
			t.Errorf("%s: metadata.name %q, want %q", form, def.Name, DefaultName)
		}
		if got := def.Spec.Names.Plural + "." + def.Spec.Group; got != DefaultName {
			t.Errorf("%s: spec.names.plural.spec.group %q, want %q", form, got, DefaultName)
		}
	}
}

// TestPlain: the plain form is what `crds` printed before v1 existed: conversion None and the
// two versions of one schema, stored as v1alpha1. A CRD with v1 and no webhook running would
// fail every read in a version other than the stored one.
func TestPlain(t *testing.T) {
	data, err := YAML()
	if err != nil {
		t.Fatal(err)
	}
	crd := decodeCRD(t, data)
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("conversion %+v, want None", crd.Spec.Conversion)
	}
	var names []string
	for _, v := range crd.Spec.Versions {
		names = append(names, v.Name)
		if v.Storage != (v.Name == "v1alpha1") {
			t.Errorf("%s: storage %v", v.Name, v.Storage)
		}
	}
	if got := strings.Join(names, ","); got != "v1alpha1,v1beta1" {
		t.Errorf("versions %s", got)
	}
}

func TestWithWebhook(t *testing.T) {
	for name, tc := range map[string]struct {
		w       Webhook
		storage string // the version stored, or the error
	}{
		"default storage": {Webhook{Namespace: "ops"}, "v1alpha1"},
		"stored as v1":    {Webhook{Namespace: "ops", StorageVersion: "v1", CABundle: []byte("PEM")}, "v1"},
		"no such version": {Webhook{Namespace: "ops", StorageVersion: "v2"}, `no version "v2" to store in (versions: v1alpha1, v1beta1, v1)`},
	} {
		t.Run(name, func(t *testing.T) {
			data, err := WithWebhook(tc.w)
			if err != nil {
				if err.Error() != tc.storage {
					t.Fatalf("error %v, want %s", err, tc.storage)
				}
				return
			}
			crd := decodeCRD(t, data)
			var stored []string
			for _, v := range crd.Spec.Versions {
				if !v.Served {
					t.Errorf("%s is not served", v.Name)
				}
				if v.Storage {
					stored = append(stored, v.Name)
				}
				if v.Subresources == nil || v.Subresources.Status == nil {
					t.Errorf("%s has no status subresource", v.Name)
				}
			}
			if strings.Join(stored, ",") != tc.storage {
				t.Errorf("stored %v, want %s", stored, tc.storage)
			}
			conv := crd.Spec.Conversion
			if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
				t.Fatalf("conversion %+v", conv)
			}
			svc := conv.Webhook.ClientConfig.Service
			if svc == nil || svc.Name != WebhookService || svc.Namespace != tc.w.Namespace || *svc.Path != WebhookPath || *svc.Port != WebhookPort {
				t.Errorf("service %+v", svc)
			}
			if string(conv.Webhook.ClientConfig.CABundle) != string(tc.w.CABundle) {
				t.Errorf("caBundle %q", conv.Webhook.ClientConfig.CABundle)
			}
			if got := strings.Join(conv.Webhook.ConversionReviewVersions, ","); got != "v1" {
				t.Errorf("review versions %s", got)
			}
			if strings.Contains(string(data), "creationTimestamp: null") || strings.Contains(string(data), "storedVersions") {
				t.Errorf("fields the cluster writes are in the manifest:\n%s", data)
			}
		})
	}
}

// TestV1Shape: v1's printer columns read paths its schema has, the ones of its own shape.
func TestV1Shape(t *testing.T) {
	crd, err := webhookCRD()
	if err != nil {
		t.Fatal(err)
	}
	var v1 *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == "v1" {
			v1 = &crd.Spec.Versions[i]
		}
	}
	if v1 == nil {
		t.Fatal("no v1")
	}
	props := v1.Schema.OpenAPIV3Schema.Properties
	for _, col := range v1.AdditionalPrinterColumns {
		segs := strings.Split(strings.TrimPrefix(col.JSONPath, "."), ".")
		p := props
		for _, s := range segs {
			if s == "metadata" {
				break
			}
			prop, ok := p[s]
			if !ok {
				t.Errorf("column %s: %s has no %q", col.Name, col.JSONPath, s)
				break
			}
			p = prop.Properties
		}
	}
	if got := props["spec"].Properties["runStrategy"].Enum; len(got) != len(schema.RunStrategies) {
		t.Errorf("runStrategy enum %v", got)
	}
}
