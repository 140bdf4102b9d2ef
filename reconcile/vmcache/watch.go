package vmcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/schema"
	"github.com/cloudnative-czs/vm-controller/watchframe"
)

// RESTClientFor makes the REST client the VM informer lists and watches with, and the
// controller writes VMs through: JSON, with no decoding of its own (the ListerWatcher and
// Answer read the bytes), paced as cfg says.
func RESTClientFor(cfg *rest.Config) (rest.Interface, error) {
	c, err := rest.UnversionedRESTClientFor(dynamic.ConfigFor(cfg))
	if err != nil {
		return nil, fmt.Errorf("make REST client: %w", err)
	}
	return c, nil
}

// RESTClientForConfigAndClient is RESTClientFor over httpClient, so that it shares that
// client's connections with the other clients made over it.
func RESTClientForConfigAndClient(cfg *rest.Config, httpClient *http.Client) (rest.Interface, error) {
	c, err := rest.UnversionedRESTClientForConfigAndClient(dynamic.ConfigFor(cfg), httpClient)
	if err != nil {
		return nil, fmt.Errorf("make REST client: %w", err)
	}
	return c, nil
}

// ObjectList is a list of VMs as the VM ListerWatcher decodes it: what the reflector needs of a
// list (its resourceVersion and continue token, and the items) and nothing else.
type ObjectList struct {
	metav1.ListMeta
	Items []*Object
}

var _ metav1.ListInterface = (*ObjectList)(nil)

// GetObjectKind has nothing to tell: the reflector reads only the items and the list metadata.
func (l *ObjectList) GetObjectKind() k8sschema.ObjectKind { return k8sschema.EmptyObjectKind }

// DeepCopyObject copies the list; its items are immutable and shared.
func (l *ObjectList) DeepCopyObject() runtime.Object {
	c := *l
	c.Items = append([]*Object(nil), l.Items...)
	return &c
}

// ListerWatcher lists and watches the VMs over a REST client (RESTClientFor) and makes each
// object's cached form straight from the bytes on the wire: the informer's, as the controller
// runs.
//
// Why not the dynamic informer and a transform: client-go decoded every watch event into a
// tree of maps (unstructured) that the transform then encoded again into the compact JSON;
// under a burst that double decode was the largest part of the controller's CPU. Here each
// object is read once, in place, with gjson, and only the bytes a view reads are copied.
type ListerWatcher struct {
	Client rest.Interface
	// WatchClient, if set, is what watches go through instead of Client: one without Client's
	// rate limiter, so that a watch never waits behind a burst of writes.
	WatchClient rest.Interface
	GVR         k8sschema.GroupVersionResource
	Namespace   string // "" for all namespaces
	Selector    string // label selector; "" for all
	// Fields is the VMs' layout, for the phase each cached Object keeps.
	Fields schema.Fields
}

var (
	_ cache.ListerWatcher            = (*ListerWatcher)(nil)
	_ cache.ListerWatcherWithContext = (*ListerWatcher)(nil)
)

func (lw *ListerWatcher) request(client rest.Interface, opts *metav1.ListOptions) *rest.Request {
	opts.LabelSelector = lw.Selector
	return client.Get().AbsPath(ResourcePath(lw.GVR, lw.Namespace)...).SpecificallyVersionedParams(opts, metav1.ParameterCodec, metav1.SchemeGroupVersion)
}

// ListWithContext lists the VMs into an ObjectList.
func (lw *ListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	res := lw.request(lw.Client, &opts).Do(ctx)
	body, err := res.Raw()
	if err != nil {
		// Error decodes the API server's Status, as Stream does for a watch; Raw's error is
		// made from the status code alone. The reflector reads a list's refusal by it: a
		// resourceVersion too large (apierrors.IsTooLargeResourceVersion, a cause of the
		// Status) makes it list again from the API server's latest, where Raw's error would
		// ask for the same version again; and the log keeps the API server's word on why.
		return nil, fmt.Errorf("list %s: %w", lw.GVR.Resource, res.Error())
	}
	return decodeList(body, lw.Fields)
}

// WatchWithContext watches the VMs; each event's object is an *Object (a *metav1.Status for
// an error event).
func (lw *ListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	client := lw.Client
	if lw.WatchClient != nil {
		client = lw.WatchClient
	}
	body, err := lw.request(client, &opts).Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", lw.GVR.Resource, err)
	}
	return watchframe.Watch(newWatchDecoder(body, lw.Fields)), nil
}

// List is ListWithContext without a context, for client-go's older interface.
func (lw *ListerWatcher) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

// Watch is WatchWithContext without a context, for client-go's older interface.
func (lw *ListerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// ResourcePath is the REST path of the resource gvr in namespace ("" for all namespaces): what
// the ListerWatcher lists and watches, and, with a VM's name, what a write of it patches.
func ResourcePath(gvr k8sschema.GroupVersionResource, namespace string) []string {
	segs := []string{"/apis", gvr.Group, gvr.Version}
	if gvr.Group == "" {
		segs = []string{"/api", gvr.Version}
	}
	if namespace != "" {
		segs = append(segs, "namespaces", namespace)
	}
	return append(segs, gvr.Resource)
}

// decodeList reads a list response: its metadata and each item's cached form.
func decodeList(body []byte, f schema.Fields) (*ObjectList, error) {
	if !gjson.ValidBytes(body) {
		return nil, errors.New("decode list: not valid JSON")
	}
	top := gjson.Parse(unsafeString(body))
	md := top.Get("metadata")
	l := &ObjectList{ListMeta: metav1.ListMeta{
		ResourceVersion: strings.Clone(md.Get("resourceVersion").String()),
		Continue:        strings.Clone(md.Get("continue").String()),
	}}
	if n := md.Get("remainingItemCount"); n.Exists() {
		c := n.Int()
		l.RemainingItemCount = &c
	}
	items := top.Get("items")
	l.Items = make([]*Object, 0, len(items.Array()))
	c := compactor{fields: f}
	var err error
	items.ForEach(func(_, v gjson.Result) bool {
		var o *Object
		if o, err = c.object(v, false); err != nil {
			return false
		}
		l.Items = append(l.Items, o)
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("decode list: %w", err)
	}
	return l, nil
}

// newWatchDecoder reads a JSON watch stream of VMs in layout f, one event at a time, into
// cached objects.
func newWatchDecoder(body io.ReadCloser, f schema.Fields) *watchframe.Decoder[gjson.Result] {
	return watchframe.NewDecoder[gjson.Result](body, &eventFormat{frames: frameReader{r: body}, c: compactor{fields: f}}, "VM")
}

// eventFormat is the JSON encoding of VM watch events (watchframe.Format): one event object
// after another, each {"type": ..., "object": ...}. An event's object is held as gjson reads
// it in place.
type eventFormat struct {
	frames frameReader
	c      compactor
}

// Frame cuts the next event out of the stream (frameReader).
func (f *eventFormat) Frame() ([]byte, error) { return f.frames.next() }

// Split finds the event's type and object. The event's bytes are read in place and
// overwritten by the next event: everything kept (the compact JSON, the metadata strings) is
// copied out by the compactor, which checks that what it keeps is valid JSON. The rest
// (managedFields above all, most of an event's bytes) is only skipped over, as the frame reader
// delimits it.
func (f *eventFormat) Split(event []byte) ([]byte, gjson.Result, error) {
	ev := gjson.Parse(unsafeString(event))
	obj, ok := f.frames.object(event)
	if !ok {
		obj = ev.Get("object")
	}
	return unsafeBytes(ev.Get("type").Str), obj, nil
}

// Object makes the cached form of an event's VM; a bookmark's notes the end of a watch list's
// initial events.
func (f *eventFormat) Object(typ watch.EventType, obj gjson.Result) (runtime.Object, error) {
	return f.c.object(obj, typ == watch.Bookmark)
}

// Status decodes the Status of an error event.
func (f *eventFormat) Status(obj gjson.Result) (*metav1.Status, error) {
	if !gjson.Valid(obj.Raw) {
		return nil, errors.New("not valid JSON")
	}
	st := &metav1.Status{}
	if err := json.Unmarshal([]byte(obj.Raw), st); err != nil {
		return nil, err
	}
	return st, nil
}
