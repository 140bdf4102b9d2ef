package reconcile

import (
	"context"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// ErrFenced is the error of a write refused before it left the process, because this
// replica can no longer be sure it leads: its last renewal of the leader Lease is older than
// the renew deadline, and another replica may lead already (package leader's fence).
// Whatever the write was decided on may be stale; nothing of it reached the API server.
var ErrFenced = errors.New("write fenced: this replica may no longer hold the leader Lease")

// vmWriter writes VMs: a merge patch of one VM, or of its status through the subresource,
// answered with the VM as the write left it, so that a reconcile carries on from that
// without waiting for the informer to bring it back. The applier and the usage poller write
// through it; apply.go and poller.go say what they write.
type vmWriter interface {
	patch(ctx context.Context, namespace, name string, patch []byte, subresources ...string) (written, error)
}

// written is a VM as a write returned it: the JSON a view reads (cut as the VM cache cuts it)
// and its resourceVersion.
type written struct {
	raw []byte
	rv  string
}

// view is the view of the written VM in layout f.
func (w written) view(f schema.Fields) schema.VirtualMachine { return schema.ViewOf(w.raw, w.rv, f) }

// restWriter writes over the REST client the VM informer lists with, and reads each response
// in place into its compact form, as the watch reads events (vmcache.Answer).
//
// Why not the dynamic client: it decodes every response into a tree of maps, which the
// controller then encoded again into the compact JSON; under a burst, decoding the responses
// of the writes was the largest part of the write path's CPU after the HTTP exchange itself.
type restWriter struct {
	client rest.Interface
	gvr    k8sschema.GroupVersionResource
}

func (w restWriter) patch(ctx context.Context, namespace, name string, patch []byte, subresources ...string) (written, error) {
	segs := append(vmcache.ResourcePath(w.gvr, namespace), name)
	segs = append(segs, subresources...)
	res := w.client.Patch(types.MergePatchType).AbsPath(segs...).
		Param("fieldManager", fieldManager).Body(patch).Do(ctx)
	body, err := res.Raw()
	if err != nil {
		// Error decodes the API server's Status (apierrors.IsConflict and the rest). Raw's
		// error is made from the status code alone ("the server rejected our request due to
		// an error in our request"): a write an admission policy refused was logged and
		// retried without the API server's word on why.
		return written{}, res.Error()
	}
	raw, rv, err := vmcache.Answer(body)
	if err != nil {
		return written{}, err
	}
	return written{raw: raw, rv: rv}, nil
}

// dynamicWriter writes through a dynamic client: for a Controller without a REST client, as
// in the unit tests, which use client-go's dynamic fake.
type dynamicWriter struct {
	client dynamic.NamespaceableResourceInterface
}

func (w dynamicWriter) patch(ctx context.Context, namespace, name string, patch []byte, subresources ...string) (written, error) {
	u, err := w.client.Namespace(namespace).Patch(ctx, name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: fieldManager}, subresources...)
	if err != nil {
		return written{}, err
	}
	return writtenOf(u)
}

// writtenOf is u as a write returned it.
func writtenOf(u *unstructured.Unstructured) (written, error) {
	raw, err := vmcache.CompactJSON(u)
	if err != nil {
		return written{}, err
	}
	return written{raw: raw, rv: u.GetResourceVersion()}, nil
}
