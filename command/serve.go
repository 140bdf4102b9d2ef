// The HTTP endpoints: metrics (and pprof, when asked for) and health.

package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// listen opens the listener of the endpoint what at addr; an empty addr opens none (nil). run
// opens both endpoints' before it asks the cluster anything, so that a port in use is an error
// at once, not after the checks and the controller's start.
func listen(what, addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s endpoint: %w", what, err)
	}
	return ln, nil
}

// serve serves h on ln (listen's) until ctx ends, then closes it; a nil ln serves nothing.
// The bound address is logged (":0" picks a free port).
func serve(ctx context.Context, what string, ln net.Listener, h http.Handler, log *slog.Logger) {
	if ln == nil {
		return
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("Endpoint stopped", "endpoint", what, "error", err)
		}
	}()
	log.Info("Serving", "endpoint", what, "addr", ln.Addr().String())
}

// metricsMux serves /metrics and, with withPprof, the runtime profiles under /debug/pprof/.
func metricsMux(metrics http.Handler, withPprof bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// readiness is what /readyz asks of the controller (*reconcile.Controller).
type readiness interface {
	// HasSynced: ready, the VM resource served and the caches synced.
	HasSynced() bool
	// Served: the VM resource is served, as far as the controller knows.
	Served() bool
}

// notServed is /readyz's answer while the VM resource is not served. The controller says
// served or not, not why: the log line "The VM resource is not served; waiting for it" has the
// reason, which this names the causes of, so that whoever reads the probe's failure looks at
// the CRD rather than at the caches (which, the resource gone, never sync).
const notServed = "VM resource not served: its CRD is missing, does not serve the version or is not Established, " +
	"or its schema no longer gives the field map in use (the log says which)"

// healthMux serves /healthz (the process works: for the liveness probe) and /readyz (the VM
// resource is served and the caches are synced: for the readiness probe). A 503 of /readyz
// says which of the two is missing: the resource not served is the more telling, as the caches
// of a resource that is not served do not sync either.
func healthMux(alive func(*http.Request) error, ready readiness) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := alive(r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case ready.HasSynced():
			fmt.Fprintln(w, "ok")
		case !ready.Served():
			http.Error(w, notServed, http.StatusServiceUnavailable)
		default:
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
		}
	})
	return mux
}
