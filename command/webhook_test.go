package command

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloudnative-czs/vm-controller/convert"
	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/webhook"
)

func TestWebhookConfigValidate(t *testing.T) {
	tests := map[string]validateCase{
		"self-managed":     {},
		"files":            {args: []string{"--tls-cert-file", "c.pem", "--tls-key-file", "k.pem", "--namespace", "", "--cert-validity", "0"}},
		"field maps":       {args: []string{"--field-map", "compute.example.org/v1=map.yaml"}},
		"log level debug":  {args: []string{"--log-level", "debug"}},
		"text logs":        {args: []string{"--log-format", "text"}},
		"larger reviews":   {args: []string{"--max-review-bytes", "268435456", "--max-review-bytes-in-flight", "536870912"}},
		"one at a time":    {args: []string{"--max-review-bytes-in-flight", "16777216"}},
		"max review bytes": {[]string{"--max-review-bytes", "1000"}, "--max-review-bytes", "--max-review-bytes must be at least 1 MiB (1048576), got 1000"},
		"largest reviews":  {args: []string{"--max-review-bytes", "1073741824", "--max-review-bytes-in-flight", "2147483648"}},
		"max review bytes too large": {[]string{"--max-review-bytes", "1073741825", "--max-review-bytes-in-flight", "2147483648"}, "--max-review-bytes",
			"--max-review-bytes must be at most 1 GiB (1073741824), got 1073741825"},
		"max review bytes of 16 GiB": {[]string{"--max-review-bytes", "17179869184", "--max-review-bytes-in-flight", "34359738368"}, "--max-review-bytes",
			"--max-review-bytes must be at most 1 GiB (1073741824), got 17179869184"},
		"max review bytes as large as int64": {[]string{"--max-review-bytes", "9223372036854775807", "--max-review-bytes-in-flight", "9223372036854775807"}, "--max-review-bytes",
			"--max-review-bytes must be at most 1 GiB (1073741824), got 9223372036854775807"},
		"review larger than in flight": {[]string{"--max-review-bytes", "268435456"}, "--max-review-bytes-in-flight",
			"--max-review-bytes-in-flight (33554432) must be at least --max-review-bytes (268435456)"},
		"slower bodies":  {args: []string{"--review-body-timeout", "29s"}},
		"no drain":       {args: []string{"--shutdown-delay", "0"}},
		"a longer drain": {args: []string{"--shutdown-delay", "30s"}},
		"negative drain": {[]string{"--shutdown-delay", "-1s"}, "--shutdown-delay", "--shutdown-delay must be at least 0 and at most 8760h0m0s, got -1s"},
		"body timeout too short": {[]string{"--review-body-timeout", "500ms"}, "--review-body-timeout",
			"--review-body-timeout must be at least 1s and under 30s, got 500ms"},
		"body timeout as long as the wait": {[]string{"--review-body-timeout", "30s"}, "--review-body-timeout",
			"--review-body-timeout must be at least 1s and under 30s, got 30s"},
		"cert without key": {[]string{"--tls-cert-file", "c.pem"}, "--tls-key-file", "--tls-cert-file and --tls-key-file go together"},
		"no listen":        {[]string{"--listen", ""}, "--listen", "--listen is empty"},
		"no namespace":     {[]string{"--namespace", ""}, "--namespace", "self-managed certificates need --namespace and --secret"},
		"no secret":        {[]string{"--secret", ""}, "--secret", "self-managed certificates need --namespace and --secret"},
		"cert outlives CA": {[]string{"--cert-validity", "9600h"}, "--cert-validity", "want 1h <= --cert-validity (9600h0m0s) <= --ca-validity (8760h0m0s)"},
		"cert too short":   {[]string{"--cert-validity", "29ns"}, "--cert-validity", "want 1h <= --cert-validity (29ns) <= --ca-validity (8760h0m0s)"},
		"log level":        {[]string{"--log-level", "loud"}, "--log-level", `--log-level "loud": want debug, info, warn or error`},
		"log format":       {[]string{"--log-format", "xml"}, "--log-format", `--log-format "xml": want text or json`},
		"bad field maps": {[]string{"--field-map", "compute.example.org/v1=map.yaml", "--field-map", "v1=map.yaml", "--field-map", "x.org/v1"}, "--field-map",
			"--field-map \"v1=map.yaml\": want group/version=file\n--field-map \"x.org/v1\": want group/version=file"},
		// As manifests and crds refuse it; a Secret was read in it.
		"bad namespace": {[]string{"--namespace", "Bad_NS"}, "--namespace",
			`--namespace "Bad_NS": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		"every problem at once": {[]string{"--listen", "", "--log-level", "loud"}, "--listen",
			"--listen is empty\n--log-level \"loud\": want debug, info, warn or error"},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &webhookConfig{}
		parseFlags(t, webhookCommand(c), args...)
		return c.Validate()
	})
}

// TestWebhookServesThroughTheDrain: after the signal the webhook answers reviews for the
// drain's delay, its readiness failing, and stops only once the delay is over. It closed its
// listener at the signal, and every review the API server still sent to the pod failed a read
// or write in a version other than the stored one, at each rollout of the webhook.
func TestWebhookServesThroughTheDrain(t *testing.T) {
	conv, err := convert.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var draining atomic.Bool
	srv := &http.Server{Handler: webhookMux(webhook.Handler{Converter: conv}, &draining), ReadHeaderTimeout: 10 * time.Second}
	// The drain is held open until the test closes release: no clock decides the order.
	started, release := make(chan time.Duration, 1), make(chan time.Time)
	d := drain{delay: 5 * time.Second, after: func(d time.Duration) <-chan time.Time { started <- d; return release },
		draining: &draining, log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serveDrained(ctx, srv, func() error { return srv.Serve(ln) }, d) }()

	base := "http://" + ln.Addr().String()
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) int {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before the signal: %d, want 200", code)
	}

	cancel() // the signal
	select {
	case got := <-started:
		if got != d.delay {
			t.Errorf("drained for %s, want --shutdown-delay %s", got, d.delay)
		}
	case err := <-done:
		t.Fatalf("the webhook stopped at the signal, without a drain: %v", err)
	}
	// During the drain: a review is converted, and the readiness probe fails.
	review := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"1","desiredAPIVersion":"cloudnative.czs/v1",` +
		`"objects":[{"apiVersion":"cloudnative.czs/v1alpha1","kind":"VirtualMachine","metadata":{"name":"test-vm"},"spec":{"action":"active","resource":{"cpu":2,"memory":"4G","rootDisk":"40G"}}}]}}`
	resp, err := client.Post(base+crds.WebhookPath, "application/json", strings.NewReader(review))
	if err != nil {
		t.Fatalf("a review during the drain: %v", err)
	}
	var answer apiextensionsv1.ConversionReview
	err = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || answer.Response == nil || answer.Response.Result.Status != metav1.StatusSuccess ||
		len(answer.Response.ConvertedObjects) != 1 || !strings.Contains(string(answer.Response.ConvertedObjects[0].Raw), `"apiVersion":"cloudnative.czs/v1"`) {
		t.Fatalf("a review during the drain: %d %+v (%v), want it converted to v1", resp.StatusCode, answer.Response, err)
	}
	if code := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz during the drain: %d, want 503", code)
	}
	select {
	case err := <-done:
		t.Fatalf("the webhook stopped during the drain: %v", err)
	default:
	}

	close(release) // the delay is over
	if err := <-done; err != nil {
		t.Fatalf("shut down: %v", err)
	}
	if resp, err := client.Get(base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("the webhook still answers after the drain: %d", resp.StatusCode)
	}
}
