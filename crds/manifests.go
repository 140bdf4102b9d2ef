package crds

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// The files: the top-level *.yaml are whole CRDs (`kubectl apply -f crds/` applies them as
// they are); versions/ holds versions that only the webhook form serves.
//
//go:embed *.yaml versions/*.yaml
var files embed.FS

// DefaultName is the name of this project's CRD, the one of the default resource: plural.group,
// as Name makes it (TestDefaultName ties it to that and to the embedded YAML).
const DefaultName = schema.DefaultResource + "." + schema.Group

// The conversion webhook's Service and path, as the webhook form of the CRD names them and
// `manifests --conversion webhook` creates them.
const (
	WebhookService = "vm-controller-webhook"
	WebhookPath    = "/convert"
	WebhookPort    = 443
)

// YAML returns every CRD manifest, in name order, as one multi-document YAML stream. It is
// the plain form: conversion None, the versions of one schema.
func YAML() ([]byte, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var b strings.Builder
	for i, n := range names {
		data, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(data)
	}
	return []byte(b.String()), nil
}

// Webhook says where the API server finds the conversion webhook and which version it stores.
type Webhook struct {
	Namespace string // of the Service WebhookService
	// CABundle is the PEM of the CA that signed the webhook's serving certificate; empty when
	// the webhook injects its own (self-managed certificates) after the CRD is applied.
	CABundle []byte
	// StorageVersion is the version objects are stored in; empty means v1alpha1, where the
	// plain form stores them, so that switching forms rewrites nothing.
	StorageVersion string
}

// Versions lists the versions the webhook form serves, in the order of the CRD.
func Versions() ([]string, error) {
	crd, err := webhookCRD()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(crd.Spec.Versions))
	for i, v := range crd.Spec.Versions {
		out[i] = v.Name
	}
	return out, nil
}

// WithWebhook returns the CRD with every version, v1 included, and webhook conversion
// through w's Service.
func WithWebhook(w Webhook) ([]byte, error) {
	crd, err := webhookCRD()
	if err != nil {
		return nil, err
	}
	storage := w.StorageVersion
	if storage == "" {
		storage = "v1alpha1"
	}
	found := false
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		v.Storage = v.Name == storage
		found = found || v.Storage
	}
	if !found {
		return nil, fmt.Errorf("no version %q to store in (versions: %s)", storage, versionNames(crd))
	}
	port := int32(WebhookPort)
	path := WebhookPath
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig: &apiextensionsv1.WebhookClientConfig{
				Service:  &apiextensionsv1.ServiceReference{Namespace: w.Namespace, Name: WebhookService, Path: &path, Port: &port},
				CABundle: w.CABundle,
			},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return nil, fmt.Errorf("render the CRD: %w", err)
	}
	// Written by the cluster, never by a manifest.
	delete(u, "status")
	if md, ok := u["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	out, err := yaml.Marshal(u)
	if err != nil {
		return nil, fmt.Errorf("render the CRD: %w", err)
	}
	return append([]byte("# The VirtualMachine API with webhook conversion: vm-controller crds --conversion webhook.\n"), out...), nil
}

// WebhookOnly says whether version is in the webhook form of this project's CRD and not in
// its plain form, which `vm-controller crds` prints (v1): a cluster that lacks it has most
// likely the plain form applied, rather than a CRD of its own.
func WebhookOnly(version string) bool {
	plain, err := plainCRD()
	if err != nil {
		return false
	}
	all, err := webhookCRD()
	if err != nil {
		return false
	}
	has := func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		return slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == version })
	}
	return has(all) && !has(plain)
}

// plainCRD is this project's CRD in its plain form, decoded.
func plainCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := files.ReadFile(DefaultName + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("read the CRD: %w", err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		return nil, fmt.Errorf("decode the CRD: %w", err)
	}
	return &crd, nil
}

// webhookCRD is the plain CRD with the versions of versions/ appended.
func webhookCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd, err := plainCRD()
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(files, "versions/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	for _, n := range names {
		data, err := files.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", n, err)
		}
		var v apiextensionsv1.CustomResourceDefinitionVersion
		if err := yaml.UnmarshalStrict(data, &v); err != nil {
			return nil, fmt.Errorf("decode %s: %w", n, err)
		}
		crd.Spec.Versions = append(crd.Spec.Versions, v)
	}
	return crd, nil
}

func versionNames(crd *apiextensionsv1.CustomResourceDefinition) string {
	var names []string
	for _, v := range crd.Spec.Versions {
		names = append(names, v.Name)
	}
	return strings.Join(names, ", ")
}
