// Package crds is the VirtualMachine resource's CustomResourceDefinition, in both of the ways
// the binary meets one: the CRDs this project ships, and the CRD a cluster serves for the
// resource the controller is pointed at.
//
// What ships (manifests.go) is embedded so that the binary can print it (vm-controller crds |
// kubectl apply -f -) and tests can apply exactly what ships. It comes in two forms. The plain
// one (YAML) serves v1alpha1 and v1beta1, which share one schema, with conversion None: the API
// server converts between them by rewriting apiVersion, and nothing else has to run. The
// webhook form (WithWebhook) adds v1 (WebhookOnly), whose shape differs, and names the
// conversion webhook that `vm-controller webhook` serves; the API server then calls that
// webhook for every read or write in a version other than the stored one, so this form is
// only safe where the webhook runs. docs/versions.md says when to use which.
//
// What a cluster serves is read as JSON, the way the API server returns it: where CRDs are
// served (GVR), the name of the one that defines a resource (Name), whether it serves a
// version (Served, whose errors say which way it does not: ErrNoVersion, ErrNotServed,
// ErrNotEstablished), the version it stores objects in (StorageResource), its conversion
// (ConversionStrategy, CABundle), whether its schema can carry what a field map says
// (StatusSubresource, CheckSchema), which built-in layout fits a CRD of another group
// (ChooseLayout), and whether that CRD, changed, still gives the layout chosen from it
// (Layout.Rechoose). The start-up checks of run and check, the controller's CRD watch, the
// RBAC rules, the manifests, the conversion webhook's caBundle and the storage version
// migration all ask here, so that they cannot disagree on any of it; a CRD held as an
// unstructured object is read here as its JSON.
package crds
