// Command peer is the VM -> Pod controller on controller-runtime, written as a skilled user of
// it would write it, so that `go -C bench run . compare` puts vm-controller next to what a strong
// team would build instead: an unstructured VirtualMachine cache (no generated types), typed
// pods owned by their VM, one reconcile that adds the finalizer, creates the pod and reports
// Creating, then Active once the pod is ready, and on deletion reports Terminating, deletes the
// pod and releases the finalizer once the pod is gone. It makes the same pod, the same status
// and the same writes as vm-controller with --events warnings (which records no Event on the
// way to Active either).
//
// What makes it strong, each where it is done:
//   - HTTP/1.1 to the API server, as vm-controller (transport.go);
//   - caches that hand out their objects without a deep copy, without managed fields, and of
//     pods only the VMs' (run, below);
//   - predicates that drop the echoes of its own writes and what the reconcile does not read
//     (events.go);
//   - merge patches of exactly the fields it changes, the finalizer's conditional on the
//     resourceVersion (status.go).
//
// It is a Go module of its own so that the product's go.mod never gains controller-runtime.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	namespace := flag.String("namespace", "", "watch VMs in this namespace only; empty: all namespaces")
	workers := flag.Int("workers", 16, "VMs reconciled in parallel (MaxConcurrentReconciles)")
	qps := flag.Float64("qps", -1, "client-side requests per second; negative: unlimited (controller-runtime's default)")
	burst := flag.Int("burst", 0, "client-side burst, with --qps >= 0")
	image := flag.String("image", "registry.k8s.io/pause:3.10", "server image")
	metricsAddr := flag.String("metrics-addr", "0", "address of /metrics (controller-runtime's registry), such as 127.0.0.1:0; 0 disables")
	withPprof := flag.Bool("pprof", false, "also serve Go's runtime profiles under /debug/pprof/ on the metrics address, as vm-controller --pprof")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	if err := run(log, *namespace, *workers, *qps, *burst, *image, *metricsAddr, *withPprof); err != nil {
		log.Error("Exiting", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, namespace string, workers int, qps float64, burst int, image, metricsAddr string, withPprof bool) error {
	// controller-runtime declares --kubeconfig on the command line itself and reads it here.
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	http1(cfg)

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fmt.Errorf("build scheme: %w", err)
	}
	// Only the server pods are cached, not every pod of the namespace.
	hasVM, err := labels.NewRequirement(labelVMUID, selection.Exists, nil)
	if err != nil {
		return fmt.Errorf("build pod selector: %w", err)
	}
	opts := ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{
			// Managed fields are half of a cached VM and read by nobody here.
			DefaultTransform: cache.TransformStripManagedFields(),
			// Reads hand out the cached object itself instead of a deep copy of it on every
			// Get: Reconcile only reads what it gets, and writes through objects of its own.
			ByObject: map[client.Object]cache.ByObject{
				newVM():       {UnsafeDisableDeepCopy: ptr.To(true)},
				&corev1.Pod{}: {Label: labels.NewSelector().Add(*hasVM), UnsafeDisableDeepCopy: ptr.To(true)},
			},
		},
		// Without this, every Get of an unstructured object is a GET from the API server.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		// Served below instead, on a listener whose address can be logged.
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}
	if namespace != "" {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if metricsAddr != "0" {
		if err := serveMetrics(log, mgr, metricsAddr, withPprof); err != nil {
			return err
		}
	}
	err = ctrl.NewControllerManagedBy(mgr).
		For(newVM(), builder.WithPredicates(vmEvents)).
		Owns(&corev1.Pod{}, builder.WithPredicates(podEvents)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(&reconciler{Client: mgr.GetClient(), image: image, now: time.Now})
	if err != nil {
		return fmt.Errorf("create controller: %w", err)
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// serveMetrics serves controller-runtime's metrics registry (its reconcile, workqueue and
// REST client metrics) at addr for as long as the manager runs, with the runtime profiles if
// withPprof, and logs the address it listens on as vm-controller does (msg=Serving
// endpoint=metrics addr=...), so that the bench can give both 127.0.0.1:0 and scrape and
// profile each. controller-runtime's own metrics server logs the address it was given, not
// the port the system chose.
func serveMetrics(log *slog.Logger, mgr manager.Manager, addr string, withPprof bool) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve metrics: %w", err)
	}
	log.Info("Serving", "endpoint", "metrics", "addr", ln.Addr().String())
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{}))
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		go func() {
			<-ctx.Done()
			_ = srv.Close()
		}()
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve metrics: %w", err)
		}
		return nil
	}))
}

// newVM is an empty VirtualMachine of the version the peer reads.
func newVM() *unstructured.Unstructured {
	vm := &unstructured.Unstructured{}
	vm.SetGroupVersionKind(vmGVK)
	return vm
}
