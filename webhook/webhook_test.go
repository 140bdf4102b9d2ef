package webhook

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/convert"
	"github.com/cloudnative-czs/vm-controller/crds"
)

// cluster is a fake API: the Secret's client and a CRD with webhook conversion.
func cluster(t *testing.T, strategy string) (*fake.Clientset, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	def := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": crds.DefaultName},
		"spec":     map[string]any{"conversion": map[string]any{"strategy": strategy}},
	}}
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{crds.GVR: "CustomResourceDefinitionList"}, def)
	return fake.NewClientset(), dyn
}

func newCerts(client *fake.Clientset, dyn *dynamicfake.FakeDynamicClient, now *time.Time) *Certs {
	return &Certs{Service: "vm-controller-webhook", Namespace: "ops", Secret: "vm-controller-webhook-tls", CRD: crds.DefaultName,
		Client: client, Dynamic: dyn, Now: func() time.Time { return *now },
		CAValidity: 365 * 24 * time.Hour, CertValidity: 30 * 24 * time.Hour}
}

func caBundle(t *testing.T, dyn *dynamicfake.FakeDynamicClient) []byte {
	t.Helper()
	def, err := dyn.Resource(crds.GVR).Get(context.Background(), crds.DefaultName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, _, _ := unstructured.NestedString(def.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// serve starts the handler over TLS with the Certs' certificate and returns a client that
// trusts only the CRD's caBundle and checks the Service's DNS name, as the API server does.
func serve(t *testing.T, c *Certs, bundle []byte) (*httptest.Server, *http.Client) {
	t.Helper()
	conv, err := convert.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(Handler{Converter: conv})
	srv.TLS = &tls.Config{GetCertificate: c.GetCertificate, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatal("empty caBundle")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: c.DNSNames()[0], MinVersion: tls.VersionTLS12}}}
	return srv, client
}

func review(t *testing.T, client *http.Client, url string, body string) (int, apiextensionsv1.ConversionReview) {
	t.Helper()
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out apiextensionsv1.ConversionReview
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
	}
	return resp.StatusCode, out
}

const vmV1alpha1 = `{"apiVersion":"cloudnative.czs/v1alpha1","kind":"VirtualMachine","metadata":{"name":"web","namespace":"default"},` +
	`"spec":{"action":"inactive","resource":{"cpu":2,"memory":"4Gi","rootDisk":"40G"}}}`

// TestConversionOverTLS: the self-managed certificate verifies against the injected caBundle
// under the Service's name, and a review converts its objects in order.
func TestConversionOverTLS(t *testing.T) {
	client, dyn := cluster(t, "Webhook")
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	c := newCerts(client, dyn, &now)
	if err := c.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv, hc := serve(t, c, caBundle(t, dyn))

	body := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"r1","desiredAPIVersion":"cloudnative.czs/v1","objects":[` +
		vmV1alpha1 + `,{"apiVersion":"cloudnative.czs/v1beta1","kind":"VirtualMachine","metadata":{"name":"b"},"spec":{"action":"active"}}]}}`
	code, out := review(t, hc, srv.URL+"/convert", body)
	if code != http.StatusOK || out.Response == nil || out.Response.UID != "r1" || out.Response.Result.Status != metav1.StatusSuccess {
		t.Fatalf("code %d, review %+v", code, out.Response)
	}
	want := []string{
		`{"apiVersion":"cloudnative.czs/v1","kind":"VirtualMachine","metadata":{"name":"web","namespace":"default"},"spec":{"resources":{"requests":{"cpu":2,"memory":"4Gi"}},"rootDisk":{"size":"40G"},"runStrategy":"Halted"}}`,
		`{"apiVersion":"cloudnative.czs/v1","kind":"VirtualMachine","metadata":{"name":"b"},"spec":{"runStrategy":"Always"}}`,
	}
	if len(out.Response.ConvertedObjects) != len(want) {
		t.Fatalf("converted %d objects", len(out.Response.ConvertedObjects))
	}
	for i, w := range want {
		if got := string(out.Response.ConvertedObjects[i].Raw); got != w {
			t.Errorf("object %d:\n got %s\nwant %s", i, got, w)
		}
	}
	if out.APIVersion != "apiextensions.k8s.io/v1" || out.Kind != "ConversionReview" {
		t.Errorf("review typed %s %s", out.APIVersion, out.Kind)
	}
}

// TestReviewErrors: what is not a ConversionReview v1 with a request, posted, is refused with
// an HTTP error that says why; a review whose objects cannot be converted is answered with a
// Failure result that names the object, which the API server passes on to its client.
func TestReviewErrors(t *testing.T) {
	client, dyn := cluster(t, "Webhook")
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	c := newCerts(client, dyn, &now)
	if err := c.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv, hc := serve(t, c, caBundle(t, dyn))
	valid := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"cloudnative.czs/v1","objects":[` + vmV1alpha1 + `]}}`
	for name, tc := range map[string]struct {
		method  string // empty: POST
		body    string
		code    int
		message string // of a Failure result
		text    string // of an HTTP error, when it is checked
	}{
		// A valid review, but not posted: it would be converted were the method not checked.
		"not POST": {method: http.MethodGet, body: valid, code: http.StatusMethodNotAllowed, text: "POST a ConversionReview"},
		// The v1beta1 review has the same fields, so it would decode and be converted; but the
		// API server sends the version it asks for (conversionReviewVersions: v1) and expects
		// the answer in it.
		"a ConversionReview of v1beta1": {body: strings.Replace(valid, "apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1", 1), code: http.StatusBadRequest,
			text: "want a ConversionReview of apiextensions.k8s.io/v1 with a request, got apiextensions.k8s.io/v1beta1 ConversionReview"},
		"not JSON":     {body: `{`, code: http.StatusBadRequest},
		"not a review": {body: `{"apiVersion":"v1","kind":"Pod"}`, code: http.StatusBadRequest},
		"no request":   {body: `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`, code: http.StatusBadRequest},
		"unknown target": {body: `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"cloudnative.czs/v9","objects":[` + vmV1alpha1 + `]}}`,
			code: http.StatusOK, message: "convert object 0 (cloudnative.czs/v1alpha1 default/web) to cloudnative.czs/v9: no field map for cloudnative.czs/v9 (known: cloudnative.czs/v1, cloudnative.czs/v1alpha1, cloudnative.czs/v1beta1)"},
		"bad target": {body: `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"a/b/c","objects":[]}}`,
			code: http.StatusOK, message: `desiredAPIVersion "a/b/c": unexpected GroupVersion string: a/b/c`},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.method != "" || tc.text != "" {
				method := cmp.Or(tc.method, http.MethodPost)
				req, err := http.NewRequest(method, srv.URL+"/convert", strings.NewReader(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				data, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != tc.code || strings.TrimSpace(string(data)) != tc.text {
					t.Errorf("%s: %d %q, want %d %q", method, resp.StatusCode, strings.TrimSpace(string(data)), tc.code, tc.text)
				}
				return
			}
			code, out := review(t, hc, srv.URL+"/convert", tc.body)
			if code != tc.code {
				t.Fatalf("code %d, want %d", code, tc.code)
			}
			if tc.message == "" {
				return
			}
			if r := out.Response; r == nil || r.UID != "u" || r.Result.Status != metav1.StatusFailure || r.Result.Message != tc.message || len(r.ConvertedObjects) != 0 {
				t.Errorf("response %+v", out.Response)
			}
		})
	}
}

// TestRotation: a second replica takes the first one's certificate from the Secret; the
// serving certificate is renewed under the same CA once two thirds of its life are gone;
// the CA is renewed before it expires, and the CRD then trusts the new and the old CA.
func TestRotation(t *testing.T) {
	client, dyn := cluster(t, "Webhook")
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	a, b := newCerts(client, dyn, &now), newCerts(client, dyn, &now)
	leaf := func(c *Certs) *x509.Certificate {
		t.Helper()
		cert, err := c.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		x, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	if _, err := a.GetCertificate(nil); err == nil {
		t.Fatal("a certificate before Ensure")
	}
	if err := a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	first := leaf(a)
	if !leaf(b).Equal(first) {
		t.Fatal("the replicas serve different certificates")
	}
	bundle1 := caBundle(t, dyn)

	now = now.Add(19 * 24 * time.Hour) // 11 days of 30 left: keep
	if err := a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if !leaf(a).Equal(first) {
		t.Fatal("renewed with more than a third of its life left")
	}
	now = now.Add(2 * 24 * time.Hour) // 9 days left: renew, same CA
	if err := a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	second := leaf(a)
	if second.Equal(first) || !bytes.Equal(caBundle(t, dyn), bundle1) {
		t.Fatal("the serving certificate was not renewed, or the CA changed with it")
	}
	if err := b.Ensure(ctx); err != nil || !leaf(b).Equal(second) {
		t.Fatalf("the other replica did not take the renewed certificate: %v", err)
	}

	now = now.Add(230 * 24 * time.Hour) // the CA has less than a third of a year left
	if err := a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	bundle2 := caBundle(t, dyn)
	if bytes.Equal(bundle2, bundle1) || !bytes.HasSuffix(bundle2, bundle1) {
		t.Fatalf("the CA was not renewed with the old one kept in the bundle:\n%s", bundle2)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle2)
	for _, c := range []*x509.Certificate{second, leaf(a)} {
		if _, err := c.Verify(x509.VerifyOptions{DNSName: a.DNSNames()[1], Roots: pool, CurrentTime: c.NotBefore.Add(2 * time.Hour)}); err != nil {
			t.Errorf("certificate %s does not verify with the bundle: %v", c.SerialNumber, err)
		}
	}
}

// TestNoWebhookConversion: a CRD with conversion None keeps its spec; serving goes on.
func TestNoWebhookConversion(t *testing.T) {
	client, dyn := cluster(t, "None")
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	c := newCerts(client, dyn, &now)
	if err := c.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	def, err := dyn.Resource(crds.GVR).Get(context.Background(), crds.DefaultName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(def.Object, "spec", "conversion", "webhook"); found {
		t.Error("caBundle set on a CRD without webhook conversion")
	}
	if _, err := c.GetCertificate(nil); err != nil {
		t.Error(err)
	}
}

// TestCABundleOnceTheCRDUsesTheWebhook: the upgrade of docs/versions.md starts the webhook
// while the CRD's conversion is still None, then applies the CRD's webhook form. Run sets the
// caBundle as soon as the CRD has webhook conversion, and again as soon as something resets
// it (an apply of a form without one), not at its timer, an hour away here as with the
// default --cert-validity: until then the API server could not verify the webhook.
func TestCABundleOnceTheCRDUsesTheWebhook(t *testing.T) {
	client, dyn := cluster(t, "None")
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	c := newCerts(client, dyn, &now)
	ctx := context.Background()
	if err := c.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	secret, err := client.CoreV1().Secrets(c.Namespace).Get(ctx, c.Secret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := base64.StdEncoding.EncodeToString(secret.Data[keyBundle])
	events, err := dyn.Resource(crds.GVR).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer events.Stop()

	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		c.Run(runCtx, time.Hour)
	}()
	defer func() {
		cancel()
		<-ran
	}()

	// The webhook form's conversion, without a caBundle, as kubectl apply writes it.
	applyWebhookForm := func() {
		t.Helper()
		def, err := dyn.Resource(crds.GVR).Get(ctx, crds.DefaultName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conversion := map[string]any{"strategy": "Webhook", "webhook": map[string]any{"conversionReviewVersions": []any{"v1"},
			"clientConfig": map[string]any{"service": map[string]any{"name": c.Service, "namespace": c.Namespace, "path": "/convert"}}}}
		if err := unstructured.SetNestedField(def.Object, conversion, "spec", "conversion"); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(crds.GVR).Update(ctx, def, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// injected waits for the CRD to hold the Secret's bundle.
	injected := func(after string) {
		t.Helper()
		failAt := time.After(10 * time.Second) // a bound on the test's wait, not the expected time
		for {
			select {
			case e, ok := <-events.ResultChan():
				if !ok {
					t.Fatal("the watch of the CRD ended")
				}
				def, ok := e.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				if got, _, _ := unstructured.NestedString(def.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle"); got == want {
					return
				}
			case <-failAt:
				t.Fatalf("no caBundle 10s after %s: the timer would set it in an hour", after)
			}
		}
	}
	applyWebhookForm()
	injected("the CRD switched to webhook conversion")
	applyWebhookForm()
	injected("the CRD's caBundle was reset")
}

// TestCABundleConflict: on a fresh install the replicas set the CRD's caBundle at once, each
// at the version it read, and all but the first are refused with a conflict. Ensure then reads
// the CRD again rather than fail, which would end the webhook at start-up: a CRD that holds the
// bundle by then (the other replica's write) is success without another write, and one that
// does not is written again. A CRD that conflicts every time is an error in the end.
func TestCABundleConflict(t *testing.T) {
	for name, tc := range map[string]struct {
		conflicts   int  // patches of the CRD refused
		otherWrites bool // another replica's write of the same bundle comes with the conflict
		patches     int  // attempted, the refused ones included
		fails       bool
	}{
		"the other replica wrote the bundle": {conflicts: 1, otherWrites: true, patches: 1},
		"the CRD changed otherwise":          {conflicts: 1, patches: 2},
		"a conflict every time":              {conflicts: 100, patches: 4, fails: true},
	} {
		t.Run(name, func(t *testing.T) {
			client, dyn := cluster(t, "Webhook")
			now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
			ctx := context.Background()
			// The other replica's certificates, in the Secret both share, so that the bundle
			// it writes to the CRD is the one this replica wants.
			other := newCerts(client, dyn, &now)
			other.CRD = ""
			if err := other.Ensure(ctx); err != nil {
				t.Fatal(err)
			}
			secret, err := client.CoreV1().Secrets("ops").Get(ctx, "vm-controller-webhook-tls", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := base64.StdEncoding.EncodeToString(secret.Data[keyBundle])

			patches := 0
			dyn.PrependReactor("patch", "customresourcedefinitions", func(action k8stesting.Action) (bool, runtime.Object, error) {
				patches++
				if patches > tc.conflicts {
					return false, nil, nil
				}
				if tc.otherWrites {
					// The tracker, not the client: a reactor runs with the client locked.
					obj, err := dyn.Tracker().Get(crds.GVR, "", crds.DefaultName)
					if err != nil {
						return true, nil, err
					}
					def := obj.(*unstructured.Unstructured).DeepCopy()
					if err := unstructured.SetNestedField(def.Object, want, "spec", "conversion", "webhook", "clientConfig", "caBundle"); err != nil {
						return true, nil, err
					}
					def.SetResourceVersion("2")
					if err := dyn.Tracker().Update(crds.GVR, def, ""); err != nil {
						return true, nil, err
					}
				}
				return true, nil, apierrors.NewConflict(crds.GVR.GroupResource(), crds.DefaultName, errors.New("the object has been modified"))
			})

			err = newCerts(client, dyn, &now).Ensure(ctx)
			if tc.fails {
				if !apierrors.IsConflict(err) {
					t.Fatalf("Ensure: %v, want the conflict", err)
				}
			} else if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			if patches != tc.patches {
				t.Errorf("%d patches of the CRD, want %d", patches, tc.patches)
			}
			if !tc.fails {
				if got := base64.StdEncoding.EncodeToString(caBundle(t, dyn)); got != want {
					t.Errorf("the CRD's caBundle is not the Secret's bundle")
				}
			}
		})
	}
}
