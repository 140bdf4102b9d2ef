package schema

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults for the resource the controller watches.
const (
	DefaultAPIVersion = "cloudnative.czs/v1alpha1"
	DefaultResource   = "virtualmachines"
	// Finalizer holds a VM until its server is gone.
	Finalizer = "cloudnative.czs/server-cleanup"
)

// ParseGVR turns the --api-version ("group/version") and --resource flags into a
// GroupVersionResource, refusing what the API server could never serve.
func ParseGVR(apiVersion, resource string) (schema.GroupVersionResource, error) {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok || group == "" || version == "" || strings.Contains(version, "/") {
		return schema.GroupVersionResource{}, fmt.Errorf("api version %q: want group/version, such as %s", apiVersion, DefaultAPIVersion)
	}
	if errs := validation.IsDNS1123Subdomain(group); len(errs) > 0 {
		return schema.GroupVersionResource{}, fmt.Errorf("api version %q: group: %s", apiVersion, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1035Label(version); len(errs) > 0 {
		return schema.GroupVersionResource{}, fmt.Errorf("api version %q: version: %s", apiVersion, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1035Label(resource); len(errs) > 0 {
		return schema.GroupVersionResource{}, fmt.Errorf("resource %q: %s", resource, strings.Join(errs, "; "))
	}
	return schema.GroupVersionResource{Group: group, Version: version, Resource: resource}, nil
}
