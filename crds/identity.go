package crds

import (
	"fmt"

	"github.com/tidwall/gjson"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
)

// GVR is where the API server serves CustomResourceDefinitions.
var GVR = k8sschema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Name is the name of the CustomResourceDefinition that defines gvr: plural.group, as the
// API server requires.
func Name(gvr k8sschema.GroupVersionResource) string { return gvr.GroupResource().String() }

// Served says whether the CRD, as JSON the way the API server returns it, serves version: it
// lists the version as served and it is Established. It returns nil when it does, else why
// not. A CRD being deleted still serves its objects until it is gone (their finalizers must
// still be released), so a deletionTimestamp does not count.
func Served(crd []byte, version string) error {
	v, err := crdVersion(crd, version)
	if err != nil {
		return err
	}
	name := gjson.GetBytes(crd, "metadata.name").String()
	if !v.Get("served").Bool() {
		return fmt.Errorf("CRD %s does not serve version %s (served: false)", name, version)
	}
	for _, c := range gjson.GetBytes(crd, "status.conditions").Array() {
		if c.Get("type").String() == "Established" {
			if c.Get("status").String() == "True" {
				return nil
			}
			break
		}
	}
	return fmt.Errorf("CRD %s is not Established", name)
}

// crdVersion returns the entry of spec.versions named version.
func crdVersion(crd []byte, version string) (gjson.Result, error) {
	if !gjson.ValidBytes(crd) {
		return gjson.Result{}, fmt.Errorf("the CRD is not valid JSON")
	}
	for _, v := range gjson.GetBytes(crd, "spec.versions").Array() {
		if v.Get("name").String() == version {
			return v, nil
		}
	}
	return gjson.Result{}, fmt.Errorf("CRD %s has no version %s", gjson.GetBytes(crd, "metadata.name").String(), version)
}
