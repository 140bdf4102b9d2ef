package crds

import (
	"errors"
	"fmt"

	"github.com/tidwall/gjson"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
)

// GVR is where the API server serves CustomResourceDefinitions.
var GVR = k8sschema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Name is the name of the CustomResourceDefinition that defines gvr: plural.group, as the
// API server requires.
func Name(gvr k8sschema.GroupVersionResource) string { return gvr.GroupResource().String() }

// The ways a CRD fails to serve a version, for errors.Is: each asks for another remedy (add
// the version, set it served, wait for the API server), which callers name.
var (
	ErrNoVersion      = errors.New("the CRD has no such version")
	ErrNotServed      = errors.New("the CRD does not serve the version")
	ErrNotEstablished = errors.New("the CRD is not Established")
)

// crdError is an error that reads as its message and is one of the kinds above.
type crdError struct {
	msg  string
	kind error
}

func (e *crdError) Error() string { return e.msg }
func (e *crdError) Unwrap() error { return e.kind }

// Served says whether the CRD, as JSON the way the API server returns it, serves version: it
// lists the version as served and it is Established. It returns nil when it does, else why
// not: an error that is ErrNoVersion, ErrNotServed or ErrNotEstablished, or none of them when
// crd is not JSON. A CRD being deleted still serves its objects until it is gone (their
// finalizers must still be released), so a deletionTimestamp does not count.
func Served(crd []byte, version string) error {
	v, err := crdVersion(crd, version)
	if err != nil {
		return err
	}
	name := gjson.GetBytes(crd, "metadata.name").String()
	if !v.Get("served").Bool() {
		return &crdError{fmt.Sprintf("CRD %s does not serve version %s (served: false)", name, version), ErrNotServed}
	}
	for _, c := range gjson.GetBytes(crd, "status.conditions").Array() {
		if c.Get("type").String() == "Established" {
			if c.Get("status").String() == "True" {
				return nil
			}
			break
		}
	}
	return &crdError{fmt.Sprintf("CRD %s is not Established", name), ErrNotEstablished}
}

// StorageResource is the CRD's resource in the version its objects are stored in: the first
// version with storage: true (the API server allows one).
func StorageResource(crd []byte) (k8sschema.GroupVersionResource, error) {
	if !gjson.ValidBytes(crd) {
		return k8sschema.GroupVersionResource{}, errNotJSON
	}
	for _, v := range gjson.GetBytes(crd, "spec.versions").Array() {
		if v.Get("storage").Type == gjson.True {
			return k8sschema.GroupVersionResource{
				Group:    stringAt(gjson.GetBytes(crd, "spec.group")),
				Version:  stringAt(v.Get("name")),
				Resource: stringAt(gjson.GetBytes(crd, "spec.names.plural")),
			}, nil
		}
	}
	return k8sschema.GroupVersionResource{}, fmt.Errorf("CRD %s has no storage version", stringAt(gjson.GetBytes(crd, "metadata.name")))
}

// ConversionStrategy is the CRD's spec.conversion.strategy: None or Webhook, or "" when it
// sets none (the API server then defaults it to None).
func ConversionStrategy(crd []byte) string {
	return stringAt(gjson.GetBytes(crd, "spec.conversion.strategy"))
}

// CABundle is the caBundle of the CRD's conversion webhook, base64-encoded PEM as it is in
// the JSON, or "" when it has none.
func CABundle(crd []byte) string {
	return stringAt(gjson.GetBytes(crd, "spec.conversion.webhook.clientConfig.caBundle"))
}

var errNotJSON = errors.New("the CRD is not valid JSON")

// crdVersion returns the entry of spec.versions named version.
func crdVersion(crd []byte, version string) (gjson.Result, error) {
	if !gjson.ValidBytes(crd) {
		return gjson.Result{}, errNotJSON
	}
	for _, v := range gjson.GetBytes(crd, "spec.versions").Array() {
		if v.Get("name").String() == version {
			return v, nil
		}
	}
	return gjson.Result{}, &crdError{fmt.Sprintf("CRD %s has no version %s", gjson.GetBytes(crd, "metadata.name").String(), version), ErrNoVersion}
}

// stringAt is r's value when it is a string, else "": a field of another type is no value
// of the field, rather than its JSON text.
func stringAt(r gjson.Result) string {
	if r.Type != gjson.String {
		return ""
	}
	return r.Str
}
