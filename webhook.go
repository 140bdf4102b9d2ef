package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cloudnative-czs/vm-controller/convert"
	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/deploy"
	"github.com/cloudnative-czs/vm-controller/schema"
	"github.com/cloudnative-czs/vm-controller/webhook"
)

// webhookConfig is the configuration of `vm-controller webhook`, filled by its flags.
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
	LogLevel     string
}

// Validate refuses what would fail later, one line per problem.
func (c *webhookConfig) Validate() error {
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
		if c.CertValidity <= 0 || c.CAValidity < c.CertValidity {
			errs = append(errs, fmt.Errorf("want 0 < --cert-validity (%s) <= --ca-validity (%s)", c.CertValidity, c.CAValidity))
		}
	}
	for _, fm := range c.FieldMaps.Value() {
		if _, _, err := parseFieldMapFlag(fm); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := parseLogLevel(c.LogLevel); err != nil {
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

func webhookCommand() *cli.Command {
	var cfg webhookConfig
	return &cli.Command{
		Name:  "webhook",
		Usage: "serve the CRD's conversion webhook (ConversionReview v1 over HTTPS) between the versions field maps describe",
		Flags: append(cfg.flags(), []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: ":9443", Usage: "address to serve HTTPS on", Destination: &cfg.Listen},
			&cli.StringFlag{Name: "tls-cert-file", Usage: "serving certificate (PEM); empty: a CA and certificate the webhook manages itself", Destination: &cfg.TLSCertFile},
			&cli.StringFlag{Name: "tls-key-file", Usage: "key of --tls-cert-file (PEM)", Destination: &cfg.TLSKeyFile},
			// POD_NAMESPACE is the pod's own namespace where the pod sets it from the downward
			// API (metadata.namespace), as the Deployment of `vm-controller manifests` does.
			&cli.StringFlag{Name: "namespace", Value: deploy.DefaultNamespace, Usage: "namespace of the webhook's Service and its certificates' Secret (self-managed certificates)",
				EnvVars: []string{"POD_NAMESPACE"}, Destination: &cfg.Namespace},
			&cli.StringFlag{Name: "secret", Value: crds.WebhookService + "-tls", Usage: "Secret that keeps the self-managed CA and certificate, shared by the replicas", Destination: &cfg.Secret},
			&cli.StringFlag{Name: "crd", Value: crds.DefaultName, Usage: "CRD whose conversion caBundle the webhook sets (self-managed certificates); empty: none", Destination: &cfg.CRD},
			&cli.StringSliceFlag{Name: "field-map", Usage: "group/version=file: convert that version too, with that field map (repeatable); the versions of cloudnative.czs are built in", Destination: &cfg.FieldMaps},
			&cli.DurationFlag{Name: "ca-validity", Value: 365 * 24 * time.Hour, Usage: "lifetime of a self-managed CA; renewed with a third left", Destination: &cfg.CAValidity},
			&cli.DurationFlag{Name: "cert-validity", Value: 30 * 24 * time.Hour, Usage: "lifetime of a self-managed serving certificate; renewed with a third left", Destination: &cfg.CertValidity},
			logLevelFlag(&cfg.LogLevel),
		}...),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if err := cfg.Validate(); err != nil {
				return cli.Exit(strings.ReplaceAll(err.Error(), "\n", "; ")+" (see --help)", 2)
			}
			return runWebhook(c.Context, &cfg)
		},
	}
}

func runWebhook(parent context.Context, cfg *webhookConfig) error {
	level, err := parseLogLevel(cfg.LogLevel)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()

	conv, err := convert.Builtin()
	if err != nil {
		return err
	}
	for _, fm := range cfg.FieldMaps.Value() {
		gv, file, _ := parseFieldMapFlag(fm)
		f, err := schema.LoadFieldMap(file)
		if err != nil {
			return cli.Exit(err.Error(), 2)
		}
		conv.Add(gv, f)
	}

	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.TLSCertFile != "" {
		// Read on every handshake so that a renewed file (a cert-manager Secret) is used
		// without a restart.
		tlsConfig.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			pair, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
			if err != nil {
				return nil, fmt.Errorf("load serving certificate: %w", err)
			}
			return &pair, nil
		}
		if _, err := tlsConfig.GetCertificate(nil); err != nil {
			return err
		}
	} else {
		rc, err := cfg.restConfig()
		if err != nil {
			return err
		}
		client, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return fmt.Errorf("make client: %w", err)
		}
		dyn, err := dynamic.NewForConfig(rc)
		if err != nil {
			return fmt.Errorf("make client: %w", err)
		}
		certs := &webhook.Certs{Service: crds.WebhookService, Namespace: cfg.Namespace, Secret: cfg.Secret, CRD: cfg.CRD,
			Client: client, Dynamic: dyn, Log: log, CAValidity: cfg.CAValidity, CertValidity: cfg.CertValidity}
		if err := certs.Ensure(ctx); err != nil {
			return err
		}
		// Checked far more often than renewal is due, so a replica takes another's renewal
		// long before the certificate it serves expires.
		go certs.Run(ctx, min(cfg.CertValidity/30, time.Hour))
		tlsConfig.GetCertificate = certs.GetCertificate
	}

	mux := http.NewServeMux()
	mux.Handle(crds.WebhookPath, webhook.Handler{Converter: conv, Log: log})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	srv := &http.Server{Addr: cfg.Listen, Handler: mux, TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServeTLS("", "") }()
	log.Info("serving conversion webhook", "listen", cfg.Listen, "versions", conv.Versions())
	select {
	case err := <-errc:
		return fmt.Errorf("serve webhook: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// crdsConfig is the configuration of `vm-controller crds`.
type crdsConfig struct {
	Conversion     string // none or webhook
	Namespace      string // of the webhook's Service
	StorageVersion string
}

// Validate refuses a conversion other than none or webhook, and webhook options without it.
func (c *crdsConfig) Validate() error {
	switch c.Conversion {
	case "none":
		if c.StorageVersion != "" && c.StorageVersion != "v1alpha1" {
			return fmt.Errorf("--storage-version %s needs --conversion webhook: the plain CRD stores v1alpha1", c.StorageVersion)
		}
	case "webhook":
		if c.Namespace == "" {
			return errors.New("--conversion webhook needs --namespace, the webhook Service's")
		}
	default:
		return fmt.Errorf("--conversion %q: want none or webhook", c.Conversion)
	}
	return nil
}

// crdsCommand prints the CRD. The default is the plain form (conversion None, no v1), so that
// `vm-controller crds | kubectl apply -f -` never makes every read depend on a webhook that is
// not running; --conversion webhook prints the form with v1 (docs/versions.md).
func crdsCommand() *cli.Command {
	var cfg crdsConfig
	return &cli.Command{
		Name:  "crds",
		Usage: "print the CustomResourceDefinitions (vm-controller crds | kubectl apply -f -)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "conversion", Value: "none", Usage: "none: v1alpha1 and v1beta1, one schema; webhook: v1 as well, converted by vm-controller webhook", Destination: &cfg.Conversion},
			&cli.StringFlag{Name: "namespace", Value: deploy.DefaultNamespace, Usage: "namespace of the webhook's Service (--conversion webhook)", Destination: &cfg.Namespace},
			&cli.StringFlag{Name: "storage-version", Usage: "version to store objects in (--conversion webhook); empty: v1alpha1", Destination: &cfg.StorageVersion},
		},
		OnUsageError: usageError,
		Action: func(*cli.Context) error {
			if err := cfg.Validate(); err != nil {
				return cli.Exit(err.Error()+" (see --help)", 2)
			}
			var data []byte
			var err error
			if cfg.Conversion == "webhook" {
				data, err = crds.WithWebhook(crds.Webhook{Namespace: cfg.Namespace, StorageVersion: cfg.StorageVersion})
			} else {
				data, err = crds.YAML()
			}
			if err != nil {
				return fmt.Errorf("render CRDs: %w", err)
			}
			_, err = os.Stdout.Write(data)
			return err
		},
	}
}
