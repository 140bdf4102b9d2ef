// Seeding: the state a burst of N VMs leaves, written straight into etcd, for the stages that
// come after the burst (cold start, the no-op round, memory, idle) at a scale whose burst this
// machine's API server would take hours to make. The first VMs still go through the
// controller, so that what is written is a copy of what the controller and the cluster made.

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	googleuuid "github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
)

// etcdKV is the etcd v3 key-value API over its JSON gateway (plain HTTP on loopback in the
// local cluster), so that the bench needs no etcd client library.
type etcdKV struct{ url string }

// etcdClient keeps a connection for each of the seed's writes in flight (Go's default keeps 2).
var etcdClient = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// kwokEtcd finds the etcd of the local cluster the kubeconfig points at: its context is
// kwok-NAME, and cluster.sh keeps NAME's kwokctl state under .cache/kwok/clusters/NAME.
func kwokEtcd(kubeconfig string) (etcdKV, error) {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return etcdKV{}, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	name, ok := strings.CutPrefix(cfg.CurrentContext, "kwok-")
	if !ok {
		return etcdKV{}, fmt.Errorf("kubeconfig %s: context %q is not a local cluster of cluster/cluster.sh (kwok-NAME); pass --etcd", kubeconfig, cfg.CurrentContext)
	}
	root, err := checkoutRoot()
	if err != nil {
		return etcdKV{}, err
	}
	file := filepath.Join(root, ".cache", "kwok", "clusters", name, "kwok.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		return etcdKV{}, fmt.Errorf("the local cluster's etcd: %w; pass --etcd", err)
	}
	m := regexp.MustCompile(`(?m)^\s*etcdPort:\s*(\d+)\s*$`).FindSubmatch(data)
	if m == nil {
		return etcdKV{}, fmt.Errorf("no etcdPort in %s; pass --etcd", file)
	}
	return etcdKV{url: "http://127.0.0.1:" + string(m[1])}, nil
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// prefixEnd is the end of the key range of every key that starts with prefix.
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	b[len(b)-1]++
	return string(b)
}

func (k etcdKV) call(method string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	r, err := etcdClient.Post(k.url+"/v3/kv/"+method, "application/json", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("etcd %s: %w", method, err)
	}
	defer r.Body.Close()
	out, err := io.ReadAll(r.Body)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", method, err)
	}
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", method, r.Status, out)
	}
	if resp == nil {
		return nil
	}
	return json.Unmarshal(out, resp)
}

// get returns the value stored at key.
func (k etcdKV) get(key string) ([]byte, error) {
	var resp struct {
		Kvs []struct{ Value string } `json:"kvs"`
	}
	if err := k.call("range", map[string]string{"key": b64(key)}, &resp); err != nil {
		return nil, err
	}
	if len(resp.Kvs) != 1 {
		return nil, fmt.Errorf("etcd: no key %s", key)
	}
	return base64.StdEncoding.DecodeString(resp.Kvs[0].Value)
}

// put writes value at key. Each key is a write of its own, as the API server makes them: the
// API server's watch cache expects one object per etcd revision, and with many keys to a
// transaction (one revision for all) a first try left seeded VMs out of the controller's cache
// for good.
func (k etcdKV) put(key, value string) error {
	return k.call("put", map[string]string{"key": b64(key), "value": b64(value)}, nil)
}

// keys lists the keys under prefix, 10,000 to a request.
func (k etcdKV) keys(prefix string) ([]string, error) {
	var out []string
	for from := prefix; ; {
		var resp struct {
			Kvs  []struct{ Key string } `json:"kvs"`
			More bool                   `json:"more"`
		}
		req := map[string]any{"key": b64(from), "range_end": b64(prefixEnd(prefix)), "keys_only": true, "limit": 10000}
		if err := k.call("range", req, &resp); err != nil {
			return nil, err
		}
		for _, kv := range resp.Kvs {
			key, err := base64.StdEncoding.DecodeString(kv.Key)
			if err != nil {
				return nil, err
			}
			out = append(out, string(key))
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, nil
		}
		from = out[len(out)-1] + "\x00"
	}
}

// deletePrefix deletes every key under prefix, each in a revision of its own (see put).
func (k etcdKV) deletePrefix(prefix string) error {
	keys, err := k.keys(prefix)
	if err != nil {
		return err
	}
	return parallel(len(keys), 32, func(i int) error {
		return k.call("deleterange", map[string]string{"key": b64(keys[i])}, nil)
	})
}

// seeder makes copies of one Active VM and its server pod, as the API server stores them.
type seeder struct {
	vm               []byte // the VM as stored (JSON)
	vmName, vmUID    string
	pod              *corev1.Pod
	podUID           string
	nodes            []string
	codec            *protobuf.Serializer
	vmPrefix, podDir string
}

// newSeeder reads the VM called name and its server pod from etcd, as the templates of the copies.
func newSeeder(kv etcdKV, e *env, name string) (*seeder, error) {
	ctx := context.Background()
	vm, err := e.dyn.Resource(vmGVR).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "cloudnative.czs/vm-uid=" + string(vm.GetUID())})
	if err != nil {
		return nil, err
	}
	if len(pods.Items) != 1 {
		return nil, fmt.Errorf("VM %s has %d server pods, want 1", name, len(pods.Items))
	}
	nodes, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s := &seeder{vmName: name, vmUID: string(vm.GetUID()), podUID: string(pods.Items[0].UID),
		codec:    protobuf.NewSerializer(scheme.Scheme, scheme.Scheme),
		vmPrefix: fmt.Sprintf("/registry/%s/%s/%s/", vmGVR.Group, vmGVR.Resource, e.ns),
		podDir:   fmt.Sprintf("/registry/pods/%s/", e.ns)}
	for _, n := range nodes.Items {
		s.nodes = append(s.nodes, n.Name)
	}
	if s.vm, err = kv.get(s.vmPrefix + name); err != nil {
		return nil, err
	}
	if !bytes.Contains(s.vm, []byte(`"phase":"Active"`)) || !bytes.Contains(s.vm, []byte(s.podUID)) {
		return nil, fmt.Errorf("VM %s as stored is not Active with server %s: %s", name, s.podUID, s.vm)
	}
	raw, err := kv.get(s.podDir + pods.Items[0].Name)
	if err != nil {
		return nil, err
	}
	obj, _, err := s.codec.Decode(raw, nil, &corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("decode the stored pod: %w", err)
	}
	s.pod = obj.(*corev1.Pod)
	return s, nil
}

// copyOf is the i-th copy: the VM, named vmName(i), and its pod, each with a uid of its own,
// the pod on the i-th node in turn; keys and values as etcd holds them. The pod keeps the
// template's status, IP addresses included (kwok's stages leave a pod with an IP alone).
func (s *seeder) copyOf(i int) (vm, pod [2]string, err error) {
	name, vmUID, podUID := vmName(i), googleuuid.NewString(), googleuuid.NewString()
	v := bytes.ReplaceAll(s.vm, []byte(s.vmUID), []byte(vmUID))
	v = bytes.ReplaceAll(v, []byte(s.podUID), []byte(podUID))
	v = bytes.ReplaceAll(v, []byte(`"`+s.vmName), []byte(`"`+name))         // metadata.name, status.server.name
	v = bytes.ReplaceAll(v, []byte(" "+s.vmName+"-"), []byte(" "+name+"-")) // the server's name in messages

	p := s.pod.DeepCopy()
	rename := func(v string) string {
		switch v {
		case s.vmName:
			return name
		case s.vmUID:
			return vmUID
		}
		return v
	}
	p.Name = strings.Replace(p.Name, s.vmName, name, 1)
	p.UID = types.UID(podUID)
	for k, v := range p.Labels {
		p.Labels[k] = rename(v)
	}
	for k, v := range p.Annotations {
		p.Annotations[k] = rename(v)
	}
	for j := range p.OwnerReferences {
		p.OwnerReferences[j].Name, p.OwnerReferences[j].UID = name, types.UID(vmUID)
	}
	p.Spec.NodeName = s.nodes[i%len(s.nodes)]
	p.ResourceVersion = ""
	p.APIVersion, p.Kind = "v1", "Pod"
	var buf bytes.Buffer
	if err := s.codec.Encode(p, &buf); err != nil {
		return vm, pod, fmt.Errorf("encode pod: %w", err)
	}
	return [2]string{s.vmPrefix + name, string(v)}, [2]string{s.podDir + p.Name, buf.String()}, nil
}

// seed writes VMs from..n-1 as copies of vmName(0) and its pod, each VM before its pod (its
// owner, so that the garbage collector finds it), 32 in flight. It registers with e's cleanups
// the removal, straight from etcd, of every VM and pod in e's namespace (burst ones included):
// a controller may still run then, and releasing so many finalizers through the API server
// would take hours. The VMs go first: a pod removed before its VM would be created again.
func seed(kv etcdKV, e *env, from, n int) error {
	s, err := newSeeder(kv, e, vmName(0))
	if err != nil {
		return fmt.Errorf("seed: the template: %w", err)
	}
	e.cleanup = append(e.cleanup, func() {
		for _, prefix := range []string{s.vmPrefix, s.podDir} {
			if err := kv.deletePrefix(prefix); err != nil {
				fmt.Fprintln(os.Stderr, "bench: remove the seeded objects:", err)
			}
		}
	})
	return parallel(n-from, 32, func(i int) error {
		vm, pod, err := s.copyOf(from + i)
		if err != nil {
			return err
		}
		if err := kv.put(vm[0], vm[1]); err != nil {
			return err
		}
		return kv.put(pod[0], pod[1])
	})
}
