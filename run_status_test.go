package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/cloudnative-czs/vm-controller/crds"
)

// TestStatusSubresourceMissing: run writes status through the main resource only when it read
// the CRD and its version has no status subresource, and says so once; a CRD it does not or
// cannot read keeps the subresource, and the log says why.
func TestStatusSubresourceMissing(t *testing.T) {
	tests := map[string]struct {
		file  string // the CRD fixture in the cluster; "" for none
		group string
		read  bool   // --watch-crd
		want  bool   // through the main resource
		log   string // in the log
	}{
		"no status subresource": {file: "no-status.yaml", group: "nostatus.example.org", read: true, want: true,
			log: `level=WARN msg="Status subresource missing; writing status through the main resource" crd=virtualmachines.nostatus.example.org version=v1alpha1`},
		"status subresource": {file: "same-shape.yaml", group: "other.example.org", read: true},
		"CRD not read": {file: "no-status.yaml", group: "nostatus.example.org",
			log: `level=INFO msg="CRD not read (--watch-crd=false); writing status through the status subresource"`},
		"CRD missing": {group: "nostatus.example.org", read: true,
			log: `level=WARN msg="Cannot read the CRD; writing status through the status subresource" crd=virtualmachines.nostatus.example.org`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.file != "" {
				u := &unstructured.Unstructured{}
				if err := u.UnmarshalJSON(establishedCRD(t, tc.file)); err != nil {
					t.Fatal(err)
				}
				objs = append(objs, u)
			}
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[k8sschema.GroupVersionResource]string{crds.GVR: "CustomResourceDefinitionList"}, objs...)
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			gvr := k8sschema.GroupVersionResource{Group: tc.group, Version: "v1alpha1", Resource: "virtualmachines"}
			if got := statusSubresourceMissing(context.Background(), client, gvr, tc.read, log); got != tc.want {
				t.Errorf("through the main resource: %v, want %v", got, tc.want)
			}
			if (tc.log == "" && buf.Len() != 0) || !strings.Contains(buf.String(), tc.log) {
				t.Errorf("log %q, want %q", buf.String(), tc.log)
			}
		})
	}
}
