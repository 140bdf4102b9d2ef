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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

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
// timer; the Secret is the one copy they share, written with a resourceVersion precondition
// so that two replicas renewing at once agree on the winner's certificate.
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

	mu   sync.RWMutex
	cert *tls.Certificate
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
			return err
		}
		pair, err := tls.X509KeyPair(b.cert, b.key)
		if err != nil {
			return fmt.Errorf("load serving certificate: %w", err)
		}
		c.mu.Lock()
		c.cert = &pair
		c.mu.Unlock()
		return nil
	}
}

// Run calls Ensure every interval until ctx ends, logging what fails: the certificate in
// use stays until it is replaced.
func (c *Certs) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.Ensure(ctx); err != nil {
				c.log().Error("renew webhook certificate", "error", err)
			}
		}
	}
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

// inject sets the CRD's caBundle to bundle unless it holds it already. A CRD without webhook
// conversion is left alone: setting a caBundle there would be refused, and it converts
// nothing through the webhook anyway.
func (c *Certs) inject(ctx context.Context, pemBundle []byte) error {
	if c.CRD == "" {
		return nil
	}
	def, err := c.Dynamic.Resource(crds.GVR).Get(ctx, c.CRD, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read CRD %s: %w", c.CRD, err)
	}
	strategy, _, _ := unstructuredString(def.Object, "spec", "conversion", "strategy")
	if strategy != "Webhook" {
		c.log().Warn("CRD does not use webhook conversion; caBundle not set", "crd", c.CRD, "strategy", strategy)
		return nil
	}
	want := base64.StdEncoding.EncodeToString(pemBundle)
	if got, _, _ := unstructuredString(def.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle"); got == want {
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

func unstructuredString(obj map[string]any, path ...string) (string, bool, error) {
	cur := any(obj)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok, nil
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
