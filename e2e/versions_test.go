//go:build e2e

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestVersionsWebhook runs the CRD's webhook form on a cluster of its own (switching the
// CRD's conversion would disturb every other test on the shared one) against
// `vm-controller webhook` on the host: a VM created in v1alpha1 reads as v1, a controller on
// v1 brings it Active; with the webhook down the API server refuses reads in v1 with its
// conversion error while the stored objects and their servers stay; with it back everything
// resumes.
func TestVersionsWebhook(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 1)
	dir := t.TempDir()
	caPEM, certFile, keyFile := serveCert(t, dir)
	addr := freeAddr(t)
	wh := startWebhook(t, addr, caPEM, certFile, keyFile)

	// The webhook form, storage v1alpha1 as the upgrade path's step 2 has it, pointed at the
	// webhook on the host.
	out, stderr, code := runBinary(t, "crds", "--conversion", "webhook")
	if code != 0 {
		t.Fatalf("crds --conversion webhook: exit %d: %s", code, stderr)
	}
	var crd map[string]any
	if err := yaml.Unmarshal([]byte(out), &crd); err != nil {
		t.Fatal(err)
	}
	webhook := crd["spec"].(map[string]any)["conversion"].(map[string]any)["webhook"].(map[string]any)
	webhook["clientConfig"] = map[string]any{"url": "https://" + addr + "/convert", "caBundle": base64.StdEncoding.EncodeToString(caPEM)}
	data, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := k.run(string(data), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply the webhook form: %v: %s", err, stderr)
	}
	eventually(t, 3*time.Minute, func() (bool, string) {
		out, err := k.try("get", "--raw", "/apis/cloudnative.czs/v1")
		return err == nil && strings.Contains(out, `"virtualmachines"`), fmt.Sprintf("v1 not served yet: %v", err)
	})

	ns := k.namespace(t)
	if _, stderr, err := k.run(fmt.Sprintf(`apiVersion: cloudnative.czs/v1alpha1
kind: VirtualMachine
metadata: {name: web, namespace: %[1]s}
spec: {action: active, resource: {cpu: 100m, memory: 64Mi, rootDisk: 1Gi}}
---
apiVersion: cloudnative.czs/v1
kind: VirtualMachine
metadata: {name: idle, namespace: %[1]s}
spec: {runStrategy: Halted, resources: {requests: {cpu: 100m, memory: 64Mi}}, rootDisk: {size: 1Gi}}
`, ns), "apply", "-f", "-"); err != nil {
		t.Fatalf("create the VMs: %v: %s", err, stderr)
	}
	get := func(version, name, path string) (string, string, error) {
		return k.run("", "-n", ns, "get", "virtualmachines."+version+".cloudnative.czs", name, "-o", "jsonpath={"+path+"}")
	}
	must := func(version, name, path string) string {
		t.Helper()
		out, stderr, err := get(version, name, path)
		if err != nil {
			t.Fatalf("get %s %s: %v: %s", version, name, err, stderr)
		}
		return out
	}
	if got := must("v1", "web", ".apiVersion} {.spec.runStrategy} {.spec.resources.requests.cpu} {.spec.rootDisk.size"); got != "cloudnative.czs/v1 Always 100m 1Gi" {
		t.Errorf("web as v1: %q", got)
	}
	if got := must("v1alpha1", "idle", ".spec.action} {.spec.resource.memory"); got != "inactive 64Mi" {
		t.Errorf("idle as v1alpha1: %q", got)
	}

	c := startController(t, ns, "--kubeconfig", k.kubeconfig, "--api-version", "cloudnative.czs/v1")
	phase := func(version, name string) string {
		out, _, _ := get(version, name, ".status.phase}/{.status.reason")
		return out
	}
	waitFor := func(version, name, want string) {
		t.Helper()
		eventually(t, 3*time.Minute, func() (bool, string) {
			got := phase(version, name)
			// A want ending in "/" takes any reason.
			return got == want || (strings.HasSuffix(want, "/") && strings.HasPrefix(got, want)), fmt.Sprintf("%s (%s) is %s", name, version, got)
		})
	}
	waitFor("v1", "web", "Active/ServerReady")
	waitFor("v1", "idle", "Inactive/")
	podUID := func() string {
		out, _ := k.try("-n", ns, "get", "pod", "web-server", "-o", "jsonpath={.metadata.uid}")
		return out
	}
	uid := podUID()
	if uid == "" {
		t.Fatal("web is Active without a server pod")
	}

	// The webhook goes away: reads in v1 fail with the API server's conversion error; the
	// stored objects, read in their stored version, and the server are untouched.
	wh.stop(t)
	eventually(t, time.Minute, func() (bool, string) {
		_, stderr, err := get("v1", "web", ".status.phase")
		return err != nil && strings.Contains(stderr, "conversion webhook for cloudnative.czs/v1alpha1, Kind=VirtualMachine failed"),
			fmt.Sprintf("get as v1 without the webhook: %v %s", err, stderr)
	})
	if got := must("v1alpha1", "web", ".spec.action} {.status.phase"); got != "active Active" {
		t.Errorf("web in its stored version with the webhook down: %q", got)
	}
	if got := must("v1alpha1", "idle", ".spec.action} {.status.phase"); got != "inactive Inactive" {
		t.Errorf("idle in its stored version with the webhook down: %q", got)
	}
	if u := podUID(); u != uid {
		t.Errorf("web's server changed with the webhook down: %s -> %s", uid, u)
	}

	// Back: both versions read again, nothing changed, and the controller (whose watch on v1
	// failed meanwhile) acts on a change made through v1.
	wh = startWebhook(t, addr, caPEM, certFile, keyFile)
	eventually(t, time.Minute, func() (bool, string) {
		got, stderr, err := get("v1", "web", ".spec.runStrategy}/{.status.phase")
		return err == nil && got == "Always/Active", fmt.Sprintf("web as v1: %q %v %s", got, err, stderr)
	})
	if u := podUID(); u != uid {
		t.Errorf("web's server was replaced: %s -> %s", uid, u)
	}
	if _, stderr, err := k.run("", "-n", ns, "patch", "virtualmachines.v1.cloudnative.czs", "idle", "--type=merge", "-p", `{"spec":{"runStrategy":"Always"}}`); err != nil {
		t.Fatalf("start idle through v1: %v: %s", err, stderr)
	}
	waitFor("v1", "idle", "Active/ServerReady")
	if got := must("v1alpha1", "idle", ".spec.action} {.status.phase"); got != "active Active" {
		t.Errorf("idle as v1alpha1 after the change through v1: %q", got)
	}
	if !c.running() {
		t.Fatalf("the controller exited: %v\n%s", c.exitErr, c.tail(20))
	}
}

// serveCert makes a CA and a serving certificate for 127.0.0.1 signed by it, writes the
// certificate and key to dir, and returns the CA's PEM for the CRD's caBundle.
func serveCert(t *testing.T, dir string) (caPEM []byte, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e webhook CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), certFile, keyFile
}

// webhookProc is a `vm-controller webhook` the test runs on the host.
type webhookProc struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

// startWebhook runs the webhook on addr with the given certificate and returns once it
// answers /healthz over TLS that the CA verifies; it is stopped when the test ends.
func startWebhook(t *testing.T, addr string, caPEM []byte, certFile, keyFile string) *webhookProc {
	t.Helper()
	log, err := os.CreateTemp(t.TempDir(), "webhook-*.log")
	if err != nil {
		t.Fatal(err)
	}
	w := &webhookProc{log: log.Name(), exited: make(chan struct{})}
	w.cmd = exec.Command(controllerBinary(t), "webhook", "--listen", addr, "--tls-cert-file", certFile, "--tls-key-file", keyFile, "--log-level", "debug", "--shutdown-delay", "0")
	w.cmd.Stdout, w.cmd.Stderr = log, log
	err = w.cmd.Start()
	log.Close()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); close(w.exited) }()
	t.Cleanup(func() {
		w.stop(t)
		if t.Failed() {
			data, _ := os.ReadFile(w.log)
			t.Logf("webhook log (last 20 lines):\n%s", lastLines(string(data), 20))
		}
	})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	eventually(t, time.Minute, func() (bool, string) {
		select {
		case <-w.exited:
			data, _ := os.ReadFile(w.log)
			t.Fatalf("the webhook exited before it served:\n%s", lastLines(string(data), 20))
		default:
		}
		resp, err := client.Get("https://" + addr + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("/healthz = %d", resp.StatusCode)
	})
	return w
}

// stop ends the webhook with SIGTERM and waits for it.
func (w *webhookProc) stop(t testing.TB) {
	select {
	case <-w.exited:
		return
	default:
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.exited:
	case <-time.After(time.Minute):
		_ = w.cmd.Process.Kill()
		<-w.exited
		t.Errorf("webhook still running 1m after SIGTERM; killed")
	}
}
