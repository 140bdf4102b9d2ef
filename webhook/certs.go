package webhook

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/cloudnative-czs/vm-controller/crds"
)

// Keys of the Secret that holds the self-managed certificates.
const (
	keyCA        = "ca.crt"
	keyCAKey     = "ca.key"
	keyBundle    = "ca-bundle.crt" // what the CRD trusts: the current CA, and the one before while it is valid
	keyCert      = corev1.TLSCertKey
	keyPrivate   = corev1.TLSPrivateKeyKey
	organisation = "vm-controller"
)

// Certs manages the webhook's own CA and serving certificate. Every replica runs Ensure on a
// timer, and when the CRD needs the caBundle (Run); the Secret is the one copy they share,
// written with a resourceVersion precondition so that two replicas renewing at once agree on
// the winner's certificate.
type Certs struct {
	Service   string // the Service's name; the certificate is for its DNS names
	Namespace string // the Service's and the Secret's namespace
	Secret    string // the Secret's name
	CRD       string // the CRD whose caBundle to set; empty: none
	Client    kubernetes.Interface
	Dynamic   dynamic.Interface
	Log       *slog.Logger
	Now       func() time.Time

	// CAValidity and CertValidity are the lifetimes of what Ensure makes; each is renewed
	// once less than a third of it is left, so that a missed timer or two changes nothing.
	CAValidity, CertValidity time.Duration

	mu       sync.RWMutex
	cert     *tls.Certificate
	caBundle string // the Secret's CA bundle when cert was put in use, base64 as in the CRD
}

// GetCertificate is for tls.Config: the certificate Ensure last put in use.
func (c *Certs) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.cert == nil {
		return nil, errors.New("no serving certificate yet")
	}
	return c.cert, nil
}

// DNSNames are the names the API server dials the Service by.
func (c *Certs) DNSNames() []string {
	return []string{c.Service + "." + c.Namespace + ".svc", c.Service + "." + c.Namespace + ".svc.cluster.local"}
}

// Ensure makes the certificates current: it reads the Secret, renews what is due (and
// writes it back), makes the CRD trust the bundle, and only then serves the certificate, so
// that the API server never meets a certificate its caBundle cannot verify.
func (c *Certs) Ensure(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		secret, err := c.Client.CoreV1().Secrets(c.Namespace).Get(ctx, c.Secret, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			secret = nil
		} else if err != nil {
			return fmt.Errorf("read secret %s/%s: %w", c.Namespace, c.Secret, err)
		}
		b, renewed, err := c.renew(secret)
		if err != nil {
			return err
		}
		if renewed {
			err = c.write(ctx, secret, b)
			if (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) && attempt < 3 {
				continue // another replica renewed first: take its certificates
			}
			if err != nil {
				return err
			}
			c.log().Info("renewed webhook certificate", "secret", c.Secret, "notAfter", b.notAfter)
		}
		if err := c.inject(ctx, b.bundle); err != nil {
			// The CRD changed since it was read: on a fresh install, the replicas all set
			// the caBundle at once, and all but the first are refused. Read both again,
			// the Secret too, so that a replica which lost to another's renewal takes its
			// bundle rather than write back its own; a CRD that holds the bundle by then is
			// left as it is. Failing here would end the webhook at start-up for nothing.
			if apierrors.IsConflict(err) && attempt < 3 {
				c.log().Info("CRD changed while its caBundle was set; reading it again", "crd", c.CRD, "attempt", attempt+1, "error", err)
				continue
			}
			return err
		}
		pair, err := tls.X509KeyPair(b.cert, b.key)
		if err != nil {
			return fmt.Errorf("load serving certificate: %w", err)
		}
		c.mu.Lock()
		c.cert = &pair
		c.caBundle = base64.StdEncoding.EncodeToString(b.bundle)
		c.mu.Unlock()
		return nil
	}
}

// Run keeps the certificates current until ctx ends: it calls Ensure every interval, which
// renews what is due and takes up what another replica renewed, and, when there is a CRD,
// as soon as that CRD uses webhook conversion with a caBundle other than the one in use.
//
// The timer alone left a CRD without a caBundle for up to an interval (an hour with the
// default --cert-validity) whenever it gained webhook conversion after the webhook started,
// as the documented upgrade does (deploy the webhook, then apply the CRD's webhook form), or
// whenever something reset its caBundle (an apply of a form without one): the API server
// cannot verify the webhook then, and every read in a version other than the stored one
// fails. So Run also watches that one CRD. The watch calls Ensure rather than write the
// bundle it holds, so that a replica which sees another's renewal in the CRD takes it from
// the Secret instead of writing back its own older bundle.
//
// Ensure runs from one work queue, one call at a time however many events come during one;
// a call that fails is logged and tried again after a backoff from a second up to interval.
// The certificate in use stays until one succeeds.
func (c *Certs) Run(ctx context.Context, interval time.Duration) {
	const key = "ensure" // the queue's one item: every reason to call Ensure is the same work
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, interval))
	stop := context.AfterFunc(ctx, q.ShutDown)
	defer stop()
	if c.CRD != "" {
		if err := c.watchCRD(ctx, func() { q.Add(key) }); err != nil {
			c.log().Error("watch CRD; its caBundle is checked on the timer only", "crd", c.CRD, "error", err)
		}
	}
	q.AddAfter(key, interval)
	for {
		item, shutdown := q.Get()
		if shutdown {
			return
		}
		err := c.Ensure(ctx)
		switch {
		case ctx.Err() != nil:
			// Stopping: the queue is shutting down.
		case err != nil:
			c.log().Error("renew webhook certificate", "error", err)
			q.AddRateLimited(item)
		default:
			q.Forget(item)
			q.AddAfter(item, interval)
		}
		q.Done(item)
	}
}

// watchCRD calls wake whenever the CRD, watched by name (which its RBAC names too), uses
// webhook conversion and its caBundle is not the one in use, until ctx ends.
func (c *Certs) watchCRD(ctx context.Context, wake func()) error {
	informer := dynamicinformer.NewFilteredDynamicInformer(c.Dynamic, crds.GVR, "", 0, cache.Indexers{}, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", c.CRD).String()
	}).Informer()
	check := func(obj any) {
		if c.wantsBundle(obj) {
			wake()
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    check,
		UpdateFunc: func(_, obj any) { check(obj) },
	}); err != nil {
		return fmt.Errorf("watch CRD %s: %w", c.CRD, err)
	}
	// A webhook deployed with RBAC of before the watch (get and patch on the CRD) keeps to
	// the timer: say so once, rather than have the reflector log each retry.
	var warned atomic.Bool
	if err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if !apierrors.IsForbidden(err) {
			cache.DefaultWatchErrorHandler(ctx, r, err)
			return
		}
		if !warned.Swap(true) {
			c.log().Warn("cannot watch CRD; its caBundle is checked on the timer only: grant list and watch on it", "crd", c.CRD, "error", err)
		}
	}); err != nil {
		return fmt.Errorf("watch CRD %s: %w", c.CRD, err)
	}
	go informer.RunWithContext(ctx)
	return nil
}

// wantsBundle reports whether obj, the CRD, uses webhook conversion with a caBundle other
// than the one in use, or whether none is in use yet.
func (c *Certs) wantsBundle(obj any) bool {
	def, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	data, err := def.MarshalJSON()
	if err != nil || crds.ConversionStrategy(data) != string(apiextensionsv1.WebhookConverter) {
		return false
	}
	got := crds.CABundle(data)
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.caBundle == "" || got != c.caBundle
}

// bundle is the content of the Secret.
type bundle struct {
	ca, caKey, bundle, cert, key []byte
	notAfter                     time.Time
}

// renew returns the certificates to use and whether they are new.
func (c *Certs) renew(secret *corev1.Secret) (bundle, bool, error) {
	now := c.now()
	var old bundle
	if secret != nil {
		old = bundle{ca: secret.Data[keyCA], caKey: secret.Data[keyCAKey], bundle: secret.Data[keyBundle], cert: secret.Data[keyCert], key: secret.Data[keyPrivate]}
	}
	ca, caKey, caOK := c.parseCA(old, now)
	if caOK {
		if leaf, ok := c.parseLeaf(old, ca, now); ok {
			old.notAfter = leaf.NotAfter
			return old, false, nil
		}
	}
	var b bundle
	if !caOK {
		var err error
		if ca, caKey, b.ca, b.caKey, err = newCA(now, c.CAValidity); err != nil {
			return bundle{}, false, err
		}
	} else {
		b.ca, b.caKey = old.ca, old.caKey
	}
	b.bundle = append([]byte(nil), b.ca...)
	if caOK && bytes.Contains(old.bundle, old.ca) {
		b.bundle = old.bundle // a new serving certificate of the same CA: trust stays as it is
	}
	// The CA before this one stays trusted while it is valid: other replicas may still serve
	// certificates it signed until they read the Secret again.
	if prev, err := parseCert(old.ca); err == nil && !bytes.Equal(old.ca, b.ca) && now.Before(prev.NotAfter) {
		b.bundle = append(b.bundle, old.ca...)
	}
	var err error
	var leaf *x509.Certificate
	if b.cert, b.key, leaf, err = newLeaf(now, c.CertValidity, ca, caKey, c.DNSNames()); err != nil {
		return bundle{}, false, err
	}
	b.notAfter = leaf.NotAfter
	return b, true, nil
}

// parseCA returns the Secret's CA if it is valid for longer than a certificate it signs
// would need.
func (c *Certs) parseCA(b bundle, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, bool) {
	ca, err := parseCert(b.ca)
	if err != nil || !ca.IsCA {
		return nil, nil, false
	}
	block, _ := pem.Decode(b.caKey)
	if block == nil {
		return nil, nil, false
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, false
	}
	if now.Before(ca.NotBefore) || ca.NotAfter.Sub(now) < c.CAValidity/3 || ca.NotAfter.Sub(now) < c.CertValidity {
		return nil, nil, false
	}
	return ca, key, true
}

// parseLeaf returns the Secret's serving certificate if ca signed it, it names the Service
// and more than a third of its life is left.
func (c *Certs) parseLeaf(b bundle, ca *x509.Certificate, now time.Time) (*x509.Certificate, bool) {
	leaf, err := parseCert(b.cert)
	if err != nil {
		return nil, false
	}
	if _, err := tls.X509KeyPair(b.cert, b.key); err != nil {
		return nil, false
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: c.DNSNames()[0], Roots: pool, CurrentTime: now}); err != nil {
		return nil, false
	}
	if leaf.NotAfter.Sub(now) < c.CertValidity/3 || !bytes.Contains(b.bundle, b.ca) {
		return nil, false
	}
	return leaf, true
}

// write stores b in the Secret: create it, or update it at the version read.
func (c *Certs) write(ctx context.Context, secret *corev1.Secret, b bundle) error {
	data := map[string][]byte{keyCA: b.ca, keyCAKey: b.caKey, keyBundle: b.bundle, keyCert: b.cert, keyPrivate: b.key}
	if secret == nil {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: c.Secret, Namespace: c.Namespace, Labels: map[string]string{"app.kubernetes.io/name": "vm-controller"}},
			Type: corev1.SecretTypeTLS, Data: data}
		if _, err := c.Client.CoreV1().Secrets(c.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create secret %s/%s: %w", c.Namespace, c.Secret, err)
		}
		return nil
	}
	s := secret.DeepCopy()
	s.Data = data
	if _, err := c.Client.CoreV1().Secrets(c.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update secret %s/%s: %w", c.Namespace, c.Secret, err)
	}
	return nil
}

// inject sets the CRD's caBundle to bundle unless it holds it already, at the CRD's version it
// read: a conflict, which Ensure retries, rather than a write over a change it has not seen
// (another replica's newer bundle). A CRD without webhook conversion is left alone: setting a
// caBundle there would be refused, and it converts nothing through the webhook anyway; Run
// calls Ensure again once it has it.
func (c *Certs) inject(ctx context.Context, pemBundle []byte) error {
	if c.CRD == "" {
		return nil
	}
	def, err := c.Dynamic.Resource(crds.GVR).Get(ctx, c.CRD, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read CRD %s: %w", c.CRD, err)
	}
	data, err := def.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encode CRD %s: %w", c.CRD, err)
	}
	strategy := crds.ConversionStrategy(data)
	if strategy != string(apiextensionsv1.WebhookConverter) {
		c.log().Warn("CRD does not use webhook conversion; caBundle not set", "crd", c.CRD, "strategy", strategy)
		return nil
	}
	want := base64.StdEncoding.EncodeToString(pemBundle)
	if crds.CABundle(data) == want {
		return nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": def.GetResourceVersion()},
		"spec":     map[string]any{"conversion": map[string]any{"webhook": map[string]any{"clientConfig": map[string]any{"caBundle": want}}}},
	})
	if err != nil {
		return fmt.Errorf("encode caBundle patch: %w", err)
	}
	if _, err := c.Dynamic.Resource(crds.GVR).Patch(ctx, c.CRD, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("set caBundle of CRD %s: %w", c.CRD, err)
	}
	c.log().Info("set CRD caBundle", "crd", c.CRD)
	return nil
}

func (c *Certs) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

func (c *Certs) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

func parseCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// newCA makes a self-signed CA valid from an hour ago (clocks differ) for validity.
func newCA(now time.Time, validity time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, []byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("generate CA serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{Organization: []string{organisation}, CommonName: "vm-controller webhook CA " + now.UTC().Format(time.RFC3339)},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("sign CA: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("parse CA: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("encode CA key: %w", err)
	}
	return ca, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// newLeaf makes a serving certificate for names, signed by ca.
func newLeaf(now time.Time, validity time.Duration, ca *x509.Certificate, caKey *ecdsa.PrivateKey, names []string) ([]byte, []byte, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generate serving key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generate serving serial: %w", err)
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{Organization: []string{organisation}, CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sign serving certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parse serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("encode serving key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), leaf, nil
}
