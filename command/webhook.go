// The webhook command: the CRD's conversion webhook, served over HTTPS.

package command

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/convert"
	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/schema"
	"github.com/cloudnative-czs/vm-controller/webhook"
)

// webhookConfig is the webhook command's configuration.
type webhookConfig struct {
	clusterFlags
	Listen       string
	TLSCertFile  string
	TLSKeyFile   string
	Namespace    string // of the Service and the certificates' Secret
	Secret       string
	CRD          string // whose caBundle to set; empty: none
	FieldMaps    cli.StringSlice
	CAValidity   time.Duration
	CertValidity time.Duration
	MaxReview    int64 // bytes
	MaxInFlight  int64 // bytes of the reviews handled at once
	BodyTimeout  time.Duration
	// ShutdownDelay is how long the webhook keeps serving after the signal, before its
	// listener closes (drain).
	ShutdownDelay time.Duration
	logFlags
}

// defaultWebhookShutdownDelay is --shutdown-delay's default: a few seconds, what it takes the
// endpoints of a deleted pod to be gone from every node's kube-proxy and the API server's
// view of the Service in a cluster that is not overloaded.
const defaultWebhookShutdownDelay = 5 * time.Second

// webhookShutdownTimeout bounds the wait for the reviews still in flight when the listener
// closes; a pod's terminationGracePeriodSeconds must cover it after --shutdown-delay
// (deploy.Webhook).
const webhookShutdownTimeout = 10 * time.Second

func webhookCommand(c *webhookConfig) *cli.Command {
	// POD_NAMESPACE is the pod's own namespace where the pod sets it from the downward API
	// (metadata.namespace), as the Deployment of `vm-controller manifests` does; it is read
	// after VMC_INSTALL_NAMESPACE.
	namespace := installNamespaceFlag(&c.Namespace, "namespace of the webhook's Service and its certificates' Secret (self-managed certificates)")
	namespace.EnvVars = append(namespace.EnvVars, "POD_NAMESPACE")
	flags := append(c.clusterFlags.flags(),
		&cli.StringFlag{Name: "listen", Value: ":9443", Usage: "address to serve HTTPS on", EnvVars: env("LISTEN"), Destination: &c.Listen},
		&cli.StringFlag{Name: "tls-cert-file", Usage: "serving certificate (PEM); empty: a CA and certificate the webhook manages itself", EnvVars: env("TLS_CERT_FILE"), Destination: &c.TLSCertFile},
		&cli.StringFlag{Name: "tls-key-file", Usage: "key of --tls-cert-file (PEM)", EnvVars: env("TLS_KEY_FILE"), Destination: &c.TLSKeyFile},
		namespace,
		&cli.StringFlag{Name: "secret", Value: crds.WebhookService + "-tls", Usage: "Secret that keeps the self-managed CA and certificate, shared by the replicas", EnvVars: env("SECRET"), Destination: &c.Secret},
		crdFlag(&c.CRD, "CRD whose conversion caBundle the webhook sets (self-managed certificates); empty: none"),
		&cli.StringSliceFlag{Name: "field-map", Usage: "group/version=file: convert that version too, with that field map (repeatable); the versions of cloudnative.czs are built in", EnvVars: env("FIELD_MAP"), Destination: &c.FieldMaps},
		&cli.DurationFlag{Name: "ca-validity", Value: 365 * 24 * time.Hour, Usage: "lifetime of a self-managed CA; renewed with a third left", EnvVars: env("CA_VALIDITY"), Destination: &c.CAValidity},
		&cli.Int64Flag{Name: "max-review-bytes", Value: webhook.DefaultMaxReviewBytes, Usage: "largest ConversionReview read, in bytes, 1 MiB to 1 GiB; a larger one is answered 413 (a list the API server converts comes in one review: raise it for clients that list many thousands of VMs of a converted version without pages; at most 1 GiB: a review takes about four times its size in memory, and 1 GiB is half of all etcd keeps under its default quota)", EnvVars: env("MAX_REVIEW_BYTES"), Destination: &c.MaxReview},
		&cli.Int64Flag{Name: "max-review-bytes-in-flight", Value: webhook.DefaultMaxReviewBytesInFlight, Usage: fmt.Sprintf("most bytes of ConversionReviews read and converted at once, at least --max-review-bytes; a review that does not fit waits for others to be answered, %s at most, then is answered 503 with Retry-After (a review holds about four times its size: the default, two of the largest, fits the webhook Deployment's memory limit of 256Mi with its GOMEMLIMIT of 200MiB; raise them together)", webhook.DefaultMaxReviewWait), EnvVars: env("MAX_REVIEW_BYTES_IN_FLIGHT"), Destination: &c.MaxInFlight},
		&cli.DurationFlag{Name: "review-body-timeout", Value: webhook.DefaultReviewBodyTimeout, Usage: fmt.Sprintf("longest a review's body may take to arrive once the review has its turn, at least 1s and under %s (the longest a review waits for its turn); a body not there by then is answered 408 and its connection closed, so that a client that announces a large body and sends nothing holds --max-review-bytes-in-flight no longer; the converted answer must likewise be taken within it, or its connection is closed, so that a client that never reads its answer holds the bound no longer either (the API server sends a review at once and reads its answer at once: raise it only for reviews larger than the network carries in that time)", webhook.DefaultMaxReviewWait), EnvVars: env("REVIEW_BODY_TIMEOUT"), Destination: &c.BodyTimeout},
		&cli.DurationFlag{Name: "shutdown-delay", Value: defaultWebhookShutdownDelay, Usage: fmt.Sprintf("on SIGINT/SIGTERM, how long to go on serving conversions, /readyz failing, before the listener closes and the reviews in flight get %s to finish: the API server and kube-proxy send reviews to a deleted pod until its endpoint is gone from their view of the Service, and each refused is a failed read or write in a version other than the stored one; 0: close at once. A pod's terminationGracePeriodSeconds must cover both (manifests sets it); a second signal ends the webhook at once", webhookShutdownTimeout), EnvVars: env("SHUTDOWN_DELAY"), Destination: &c.ShutdownDelay},
		&cli.DurationFlag{Name: "cert-validity", Value: 30 * 24 * time.Hour, Usage: "lifetime of a self-managed serving certificate; renewed with a third left", EnvVars: env("CERT_VALIDITY"), Destination: &c.CertValidity},
	)
	// JSON by default: the webhook runs only in a cluster, where logs are collected.
	flags = append(flags, c.logFlags.flags("json")...)
	return &cli.Command{
		Name:         "webhook",
		Usage:        "serve the CRD's conversion webhook (ConversionReview v1 over HTTPS) between the versions field maps describe",
		Flags:        flags,
		OnUsageError: usageError,
		Action:       action(c, noArgs, func(cc *cli.Context) error { return serveWebhook(cc, *c) }),
	}
}

// Validate refuses what would fail later, every problem at once.
func (c webhookConfig) Validate() error {
	var errs []error
	if c.Listen == "" {
		errs = append(errs, errors.New("--listen is empty"))
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-key-file go together"))
	}
	if c.TLSCertFile == "" {
		if c.Namespace == "" || c.Secret == "" {
			errs = append(errs, errors.New("self-managed certificates need --namespace and --secret"))
		}
		// As manifests and crds refuse it, before a request is made in a namespace that
		// cannot exist.
		if err := validLabel("namespace", c.Namespace); err != nil {
			errs = append(errs, err)
		}
		// At least an hour: renewal is checked every thirtieth of the lifetime, and a
		// certificate shorter than the API server's own connections would be renewed
		// faster than it is used.
		if c.CertValidity < time.Hour || c.CAValidity < c.CertValidity {
			errs = append(errs, fmt.Errorf("want 1h <= --cert-validity (%s) <= --ca-validity (%s)", c.CertValidity, c.CAValidity))
		}
	}
	switch {
	case c.MaxReview < 1<<20:
		errs = append(errs, fmt.Errorf("--max-review-bytes must be at least 1 MiB (1048576), got %d", c.MaxReview))
	case c.MaxReview > webhook.MaxReviewBytesCeiling:
		// More is no review the webhook could hold (webhook.MaxReviewBytesCeiling).
		errs = append(errs, fmt.Errorf("--max-review-bytes must be at most 1 GiB (%d), got %d", webhook.MaxReviewBytesCeiling, c.MaxReview))
	}
	// A review as large as allowed must be able to get its turn, or it would wait for bytes
	// that are never free.
	if c.MaxInFlight < c.MaxReview {
		errs = append(errs, fmt.Errorf("--max-review-bytes-in-flight (%d) must be at least --max-review-bytes (%d)", c.MaxInFlight, c.MaxReview))
	}
	// Under the wait for a turn, or a review queued behind bodies that never come would be
	// answered 503 before their timeout gives it their bytes.
	if c.BodyTimeout < time.Second || c.BodyTimeout >= webhook.DefaultMaxReviewWait {
		errs = append(errs, fmt.Errorf("--review-body-timeout must be at least 1s and under %s, got %s", webhook.DefaultMaxReviewWait, c.BodyTimeout))
	}
	if c.ShutdownDelay < 0 || c.ShutdownDelay > maxDuration {
		errs = append(errs, fmt.Errorf("--shutdown-delay must be at least 0 and at most %s, got %s", maxDuration, c.ShutdownDelay))
	}
	for _, fm := range c.FieldMaps.Value() {
		if _, _, err := parseFieldMapFlag(fm); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.logFlags.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// parseFieldMapFlag reads "group/version=file".
func parseFieldMapFlag(s string) (k8sschema.GroupVersion, string, error) {
	av, file, ok := strings.Cut(s, "=")
	if !ok || file == "" {
		return k8sschema.GroupVersion{}, "", fmt.Errorf("--field-map %q: want group/version=file", s)
	}
	gv, err := k8sschema.ParseGroupVersion(av)
	if err != nil || gv.Group == "" || gv.Version == "" {
		return k8sschema.GroupVersion{}, "", fmt.Errorf("--field-map %q: want group/version=file", s)
	}
	return gv, file, nil
}

// serveWebhook serves conversions until a signal: with the certificate files given, or with a
// CA and certificate it keeps in a Secret and renews, setting the CRD's caBundle.
func serveWebhook(cc *cli.Context, c webhookConfig) error {
	log, err := c.logFlags.setUp(cc.App.ErrWriter)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cc.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Once the signal is in, a second one ends the process at once rather than wait out
	// the drain.
	context.AfterFunc(ctx, stop)

	conv, err := convert.Builtin()
	if err != nil {
		return err
	}
	for _, fm := range c.FieldMaps.Value() {
		gv, file, _ := parseFieldMapFlag(fm)
		f, err := schema.LoadFieldMap(file)
		if err != nil {
			return cli.Exit(err.Error(), 2)
		}
		conv.Add(gv, f)
	}

	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TLSCertFile != "" {
		// Read on every handshake so that a renewed file (a cert-manager Secret) is used
		// without a restart.
		tlsConfig.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			pair, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
			if err != nil {
				return nil, fmt.Errorf("load serving certificate: %w", err)
			}
			return &pair, nil
		}
		if _, err := tlsConfig.GetCertificate(nil); err != nil {
			return err
		}
	} else {
		if vms := unreadNamespaceEnv(cc, c.Namespace); vms != "" {
			log.Warn("VMC_NAMESPACE is not read: it is run's and check's, the VMs' namespace; the webhook's is --namespace, VMC_INSTALL_NAMESPACE or POD_NAMESPACE",
				"VMC_NAMESPACE", vms, "namespace", c.Namespace)
		}
		rc, err := c.restConfig(cc.App.Version)
		if err != nil {
			return err
		}
		cl, err := newAPIClients(rc)
		if err != nil {
			return err
		}
		certs := &webhook.Certs{Service: crds.WebhookService, Namespace: c.Namespace, Secret: c.Secret, CRD: c.CRD,
			Client: cl.kube, Dynamic: cl.dynamic, Log: log, CAValidity: c.CAValidity, CertValidity: c.CertValidity}
		if err := certs.Ensure(ctx); err != nil {
			return err
		}
		// Checked far more often than renewal is due, so a replica takes another's renewal
		// long before the certificate it serves expires; and at once whenever the CRD has
		// webhook conversion without the caBundle in use (Run watches it), as when its
		// webhook form is applied after the webhook started.
		go certs.Run(ctx, min(c.CertValidity/30, time.Hour))
		tlsConfig.GetCertificate = certs.GetCertificate
	}

	var draining atomic.Bool
	srv := &http.Server{Handler: webhookMux(webhook.Handler{Converter: conv, Log: log, MaxBytes: c.MaxReview, InFlight: webhook.NewInFlight(c.MaxInFlight),
		BodyTimeout: c.BodyTimeout}, &draining), TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return fmt.Errorf("serve webhook: %w", err)
	}
	log.Info("serving conversion webhook", "listen", c.Listen, "versions", conv.Versions())
	return serveDrained(ctx, srv, func() error { return srv.ServeTLS(ln, "", "") },
		drain{delay: c.ShutdownDelay, after: time.After, draining: &draining, log: log})
}

// webhookMux serves conversions at crds.WebhookPath, /healthz (the process serves: the
// liveness probe) and /readyz (it serves and is not draining: the readiness probe).
func webhookMux(conversions http.Handler, draining *atomic.Bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(crds.WebhookPath, conversions)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if draining.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

// drain is what the webhook does between the signal and the listener's close.
type drain struct {
	delay time.Duration
	// after is time.After; a test holds the drain open with a channel of its own.
	after    func(time.Duration) <-chan time.Time
	draining *atomic.Bool // set at the signal: /readyz fails from then on
	log      *slog.Logger
}

// serveDrained runs serve (srv's Serve or ServeTLS on its listener) until ctx ends, goes on
// serving for the drain's delay, and then shuts srv down, waiting for the reviews in flight up
// to webhookShutdownTimeout. A webhook that closed its listener at the signal refused every
// review the API server still sent to its pod's address until the endpoints of the Service
// caught up, and each refusal failed a read (a controller's informer in v1, a list, the
// garbage collector) or a write in a version other than the stored one: at every rollout of
// the webhook's Deployment and every drain of a node one of its pods was on.
func serveDrained(ctx context.Context, srv *http.Server, serve func() error, d drain) error {
	errc := make(chan error, 1)
	go func() { errc <- serve() }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve webhook: %w", err)
	case <-ctx.Done():
	}
	d.draining.Store(true)
	d.log.Info("draining conversion webhook", "delay", d.delay)
	select {
	case err := <-errc:
		return fmt.Errorf("serve webhook: %w", err)
	case <-d.after(d.delay):
	}
	d.log.Info("shutting down conversion webhook", "timeout", webhookShutdownTimeout)
	shutdown, cancel := context.WithTimeout(context.Background(), webhookShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("shut down webhook: %w", err)
	}
	return nil
}
