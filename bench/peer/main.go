// Command peer is the VM -> Pod controller written the obvious way on controller-runtime, so
// that `go run ./bench compare` can put vm-controller next to what a competent engineer would
// build instead: an unstructured VirtualMachine cache (no generated types), typed pods owned
// by their VM, one reconcile that adds the finalizer, creates the pod and reports Creating,
// then Active once the pod is ready, and the finalizer released once the pod is gone.
//
// It is a Go module of its own so that the product's go.mod never gains controller-runtime.
// It records no Events: vm-controller is compared with --events warnings, which records none
// on the way to Active either.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	namespace := flag.String("namespace", "", "watch VMs in this namespace only; empty: all namespaces")
	workers := flag.Int("workers", 16, "VMs reconciled in parallel (MaxConcurrentReconciles)")
	qps := flag.Float64("qps", -1, "client-side requests per second; negative: unlimited (controller-runtime's default)")
	burst := flag.Int("burst", 0, "client-side burst, with --qps >= 0")
	image := flag.String("image", "registry.k8s.io/pause:3.10", "server image")
	metricsAddr := flag.String("metrics-addr", "0", "address of /metrics; 0 disables")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	if err := run(*namespace, *workers, *qps, *burst, *image, *metricsAddr); err != nil {
		log.Error("Exiting", "err", err)
		os.Exit(1)
	}
}

func run(namespace string, workers int, qps float64, burst int, image, metricsAddr string) error {
	// controller-runtime declares --kubeconfig on the command line itself and reads it here.
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(qps), burst

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
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject:         map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: labels.NewSelector().Add(*hasVM)}},
		},
		// Without this, every Get of an unstructured object is a GET from the API server.
		Client:                 client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: "0",
	}
	if namespace != "" {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	err = ctrl.NewControllerManagedBy(mgr).
		For(newVM()).
		Owns(&corev1.Pod{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(&reconciler{Client: mgr.GetClient(), image: image})
	if err != nil {
		return fmt.Errorf("create controller: %w", err)
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// newVM is an empty VirtualMachine of the version the peer reads.
func newVM() *unstructured.Unstructured {
	vm := &unstructured.Unstructured{}
	vm.SetGroupVersionKind(vmGVK)
	return vm
}
