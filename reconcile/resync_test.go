package reconcile

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// TestResyncHandsTheCachedObject holds client-go to what the VM informer's handler
// (onVMUpdate) and the pods backend's (vmHandlers, the budgets' events) take a resync by: a
// replay from the cache hands the handler the cached object itself as both old and new, the
// informer's transform not run again, for the plain informer (VMs, pods) and the shared one
// (claims, budgets) alike. Were it another object, a resync would be taken for a change, or
// an echo, again.
func TestResyncHandsTheCachedObject(t *testing.T) {
	newLW := func() cache.ListerWatcher {
		return plainListWatch{&cache.ListWatch{
			ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
				return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "10"},
					Items: []corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: "10"}}}}, nil
			},
			WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
				return watch.NewFake(), nil
			},
		}}
	}
	transform := func(obj any) (any, error) {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			return cm.DeepCopy(), nil // a new object each time it runs
		}
		return obj, nil
	}
	for name, run := range map[string]func(ctx context.Context, h cache.ResourceEventHandler){
		"plain": func(ctx context.Context, h cache.ResourceEventHandler) {
			_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{ListerWatcher: newLW(), ObjectType: &corev1.ConfigMap{},
				Handler: h, ResyncPeriod: 20 * time.Millisecond, Transform: transform})
			go ctrl.RunWithContext(ctx)
		},
		"shared": func(ctx context.Context, h cache.ResourceEventHandler) {
			// A shared informer resyncs at most once a second.
			inf := cache.NewSharedIndexInformer(newLW(), &corev1.ConfigMap{}, time.Second, cache.Indexers{})
			if err := inf.SetTransform(transform); err != nil {
				t.Fatal(err)
			}
			if _, err := inf.AddEventHandler(h); err != nil {
				t.Fatal(err)
			}
			go inf.RunWithContext(ctx)
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var mu sync.Mutex
			var same, other int
			resynced := make(chan struct{}, 100)
			run(ctx, cache.ResourceEventHandlerFuncs{UpdateFunc: func(old, cur any) {
				mu.Lock()
				if old == cur {
					same++
				} else {
					other++
				}
				mu.Unlock()
				resynced <- struct{}{}
			}})
			for range 3 { // three resyncs: no watch event comes, so each update is one
				select {
				case <-resynced:
				case <-time.After(time.Minute):
					t.Fatal("no resync within a minute")
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if other != 0 || same < 3 {
				t.Errorf("resyncs handed the cached object as both %d times, another object %d times; want every time", same, other)
			}
		})
	}
}

// plainListWatch is a ListWatch that lists and then watches, as the fake clients do: its watch
// sends no initial events of a watch list.
type plainListWatch struct{ *cache.ListWatch }

func (plainListWatch) IsWatchListSemanticsUnSupported() bool { return true }
