// Package storageversion moves every stored VirtualMachine to the CRD's storage version and
// then trims the CRD's status.storedVersions to it, the step after changing the storage
// version that lets a version be removed from the CRD later: `vm-controller migrate`. It is
// not a VM's move to another node (`kubectl vm migrate`, reconcile/decision/migrate.go).
//
// It rewrites each object with a no-op update: the API server reads the object, converts it
// to the storage version and writes it back in that version. The update carries the
// resourceVersion it read, so it never overwrites a change made meanwhile; a conflict means
// someone else wrote the object, which stored it in the storage version as well. Running it
// again, or resuming it from a continue token that has expired (the run starts over),
// rewrites what an earlier run rewrote and changes nothing, so it is safe to interrupt.
//
// Every page of one list is read from the snapshot of its first page, which the API server's
// compaction of etcd removes 5 to 10 minutes later (by default): a pass that takes longer
// gets 410 Gone (the continue token expired) and has to list from the beginning again. A run
// remembers the objects it has rewritten, by UID, and skips them on the new pass, so that
// each pass spends its time on what is left and the run ends with one that reaches the end.
package storageversion

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/cloudnative-czs/vm-controller/crds"
)

// Migrator rewrites the objects of one CRD.
type Migrator struct {
	Client   dynamic.Interface
	CRD      string // e.g. virtualmachines.cloudnative.czs
	PageSize int64  // objects per list page; 0: 500
	Log      *slog.Logger
}

// Result says what a run did.
type Result struct {
	StorageVersion string   // the version everything is stored in now
	Rewritten      int      // objects written back
	Conflicts      int      // objects someone else wrote meanwhile (stored in the storage version by that write)
	Gone           int      // objects deleted between the list and the update
	Skipped        int      // objects a pass listed again after a continue token expired, done by this run already (once per pass)
	StoredBefore   []string // status.storedVersions before the run
	Trimmed        bool     // whether status.storedVersions was changed
}

// Run migrates every object, starting from the page continueToken names ("" for the first),
// and trims status.storedVersions once all are done. Each page's token is logged: a run that
// stops can be resumed from the last one.
//
// When a token expires (the pass outlived etcd's compaction window, or a resumed run was
// given an old one) Run lists from the beginning again, skipping the objects it has already
// done, and ends once a pass gets to the end of the list. Objects created after a pass began
// are not missed: the API server stores them in the storage version as it creates them.
func (m *Migrator) Run(ctx context.Context, continueToken string) (Result, error) {
	def, err := m.Client.Resource(crds.GVR).Get(ctx, m.CRD, metav1.GetOptions{})
	if err != nil {
		return Result{}, fmt.Errorf("read CRD %s: %w", m.CRD, err)
	}
	gvr, err := storageResource(def)
	if err != nil {
		return Result{}, err
	}
	res := Result{StorageVersion: gvr.Version}
	res.StoredBefore, _, _ = unstructured.NestedStringSlice(def.Object, "status", "storedVersions")

	limit := m.PageSize
	if limit <= 0 {
		limit = 500
	}
	// done holds the UIDs of the objects this run has rewritten (or found written by someone
	// else, or gone). A UID is enough to skip one: an object rewritten in this run is stored
	// in the storage version from then on, whatever is written to it later (trim refuses if
	// the storage version changed meanwhile), and one deleted and created again under its
	// name has a new UID, so it is rewritten. An object without a UID (the API server gives
	// every object one) is never skipped.
	done := map[types.UID]struct{}{}
	// fromStart: the pass under way began at the first page; progressed: it has done an
	// object that was not done before.
	fromStart, progressed := continueToken == "", false
	for page := 1; ; page++ {
		list, err := m.Client.Resource(gvr).List(ctx, metav1.ListOptions{Limit: limit, Continue: continueToken})
		if apierrors.IsResourceExpired(err) && continueToken != "" {
			if fromStart && !progressed {
				// The next pass would list the same objects done before and expire as
				// this one did: listing them alone takes longer than the token lives.
				return res, fmt.Errorf("list %s: the continue token expired before a pass from the start got past the %d objects this run has rewritten (larger pages take fewer lists): %w",
					gvr.GroupResource(), len(done), err)
			}
			// The token outlived the list's snapshot: start again from the beginning,
			// skipping what this run has done.
			m.log().Warn("continue token expired; listing from the start, skipping what this run has rewritten", "page", page, "done", len(done))
			continueToken = ""
			fromStart, progressed = true, false
			continue
		}
		if err != nil {
			return res, fmt.Errorf("list %s: %w", gvr.GroupResource(), err)
		}
		skipped := 0
		for i := range list.Items {
			obj := &list.Items[i]
			uid := obj.GetUID()
			if _, ok := done[uid]; ok {
				skipped++
				continue
			}
			if err := m.rewrite(ctx, gvr, obj, &res); err != nil {
				return res, err
			}
			if uid != "" {
				done[uid] = struct{}{}
			}
			progressed = true
		}
		res.Skipped += skipped
		if next := list.GetContinue(); next != "" && next == continueToken {
			return res, fmt.Errorf("list %s: the server returned the continue token it was given", gvr.GroupResource())
		} else {
			continueToken = next
		}
		m.log().Info("migrated page", "page", page, "objects", len(list.Items), "skipped", skipped, "continue", continueToken)
		if continueToken == "" {
			break
		}
	}
	trimmed, err := m.trim(ctx, gvr.Version)
	res.Trimmed = trimmed
	return res, err
}

// rewrite writes obj back unchanged, at the resourceVersion it was read at.
func (m *Migrator) rewrite(ctx context.Context, gvr k8sschema.GroupVersionResource, obj *unstructured.Unstructured, res *Result) error {
	_, err := m.Client.Resource(gvr).Namespace(obj.GetNamespace()).Update(ctx, obj, metav1.UpdateOptions{})
	switch {
	case err == nil:
		res.Rewritten++
	case apierrors.IsConflict(err):
		res.Conflicts++
	case apierrors.IsNotFound(err):
		res.Gone++
	default:
		return fmt.Errorf("rewrite %s %s/%s: %w", gvr.Resource, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// trim sets status.storedVersions to the storage version alone, with the CRD's
// resourceVersion as a precondition; a conflict is retried on a fresh read. It refuses when
// the storage version changed since the run began: the objects were written in another one.
func (m *Migrator) trim(ctx context.Context, version string) (bool, error) {
	for attempt := 0; ; attempt++ {
		def, err := m.Client.Resource(crds.GVR).Get(ctx, m.CRD, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("read CRD %s: %w", m.CRD, err)
		}
		gvr, err := storageResource(def)
		if err != nil {
			return false, err
		}
		if gvr.Version != version {
			return false, fmt.Errorf("the storage version of CRD %s changed from %s to %s during the migration; run it again", m.CRD, version, gvr.Version)
		}
		stored, _, _ := unstructured.NestedStringSlice(def.Object, "status", "storedVersions")
		if slices.Equal(stored, []string{version}) {
			return false, nil
		}
		if err := unstructured.SetNestedStringSlice(def.Object, []string{version}, "status", "storedVersions"); err != nil {
			return false, fmt.Errorf("set storedVersions: %w", err)
		}
		_, err = m.Client.Resource(crds.GVR).UpdateStatus(ctx, def, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && attempt < 5 {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("trim storedVersions of CRD %s: %w", m.CRD, err)
		}
		m.log().Info("trimmed storedVersions", "crd", m.CRD, "before", stored, "after", version)
		return true, nil
	}
}

// storageResource is the CRD's resource in its storage version, as crds reads it.
func storageResource(def *unstructured.Unstructured) (k8sschema.GroupVersionResource, error) {
	data, err := def.MarshalJSON()
	if err != nil {
		return k8sschema.GroupVersionResource{}, fmt.Errorf("encode CRD %s: %w", def.GetName(), err)
	}
	return crds.StorageResource(data)
}

func (m *Migrator) log() *slog.Logger {
	if m.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.Log
}
