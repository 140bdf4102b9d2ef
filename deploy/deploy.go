// Package deploy renders what it takes to run vm-controller in a cluster: the CRD, a
// ServiceAccount, least-privilege RBAC (built from package access, the one list of the
// permissions the controller uses) and a Deployment of replicas that elect a leader.
package deploy

import (
	"bytes"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/access"
)

// Name names every object the manifests create.
const Name = "vm-controller"

// DefaultNamespace is the namespace the manifests install into unless told otherwise, and so
// the one the webhook and the CRD's webhook form assume for the webhook's Service.
const DefaultNamespace = "vm-controller"

// fieldMapKey and fieldMapDir are where a shipped field map lives in its ConfigMap and in the
// controller's container.
const (
	fieldMapKey = "fieldmap.yaml"
	fieldMapDir = "/etc/vm-controller"
)

// Ports of the controller's endpoints in the Deployment.
const (
	MetricsPort = 8080
	HealthPort  = 8081
)

// Options say what to deploy.
type Options struct {
	GVR            schema.GroupVersionResource // the VirtualMachine resource
	Namespace      string                      // where the controller runs
	WatchNamespace string                      // the one namespace it manages; "" for all
	Selector       string                      // run's --selector: the VMs it manages; "" for all
	Image          string                      // the controller's image
	Replicas       int32
	WatchNodes     bool
	WatchCRD       bool
	Usage          bool   // sample usage from metrics.k8s.io
	Disks          bool   // a PersistentVolumeClaim per VM (run's --root-disk claim); false: --root-disk=ephemeral
	CRD            []byte // the CRD manifest to include; nil to leave it out
	// FieldMap, if set, is a field-map file's content: shipped in a ConfigMap, mounted
	// read-only, and given to run as --schema-file.
	FieldMap []byte
	// Args are more arguments for `vm-controller run` (e.g. --server-image), in order.
	Args []string
	// Webhook, if set, deploys the conversion webhook too. CRD should then be the CRD's
	// webhook form (crds.WithWebhook), which names the Service rendered here.
	Webhook *Webhook
}

// Webhook says how to deploy the conversion webhook (`vm-controller webhook`, self-managed
// certificates). It runs in a Deployment of its own, not as a second container of the
// controller's pods: the API server needs it on every replica that is up, while only the
// leader of the controller's replicas works and a controller's readiness waits for its caches,
// which, on a version other than the stored one, wait for the webhook; its own ServiceAccount
// keeps the Secret out of the controller's reach and VMs and pods out of the webhook's.
type Webhook struct {
	Replicas int32
	Service  string // the Service the CRD's conversion names; the Deployment, ServiceAccount and roles take its name too
	Port     int32  // the Service's port, as the CRD names it
	Secret   string // the Secret of the self-managed certificates
	CRD      string // the name of the CRD whose caBundle the webhook sets
	// ShutdownDelay is the webhook's --shutdown-delay, how long it goes on serving after
	// SIGTERM, and ShutdownTimeout how long it then waits for the reviews in flight: the
	// pod's terminationGracePeriodSeconds covers both.
	ShutdownDelay, ShutdownTimeout time.Duration
}

// WebhookListenPort is the port `vm-controller webhook` serves on in its pods (its --listen
// default); the Service maps Webhook.Port to it.
const WebhookListenPort = 9443

// Render returns the manifests as one YAML stream, in the order kubectl apply needs them. It
// refuses a controller installed in the namespace it watches: deleting that namespace would
// delete the controller's ServiceAccount and Lease before the controller removed its VMs'
// finalizers, and the namespace would never finish terminating.
func Render(o Options) ([]byte, error) {
	if o.WatchNamespace != "" && o.WatchNamespace == o.Namespace {
		return nil, fmt.Errorf("the controller's namespace %s is the one it watches: install it in a namespace of its own", o.Namespace)
	}
	needs := access.Needs{GVR: o.GVR, WatchNodes: o.WatchNodes, LeaderElect: true, WatchCRD: o.WatchCRD, Usage: o.Usage, Disks: o.Disks, Namespace: o.WatchNamespace}
	var objs []any
	if o.Namespace != "default" && o.Namespace != "kube-system" {
		objs = append(objs, &corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: o.Namespace, Labels: labels()}})
	}
	objs = append(objs, &corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(Name, o.Namespace),
		AutomountServiceAccountToken: ptr.To(true)})
	objs = append(objs, rbac(Name, labels(), o.Namespace, o.WatchNamespace, access.Rules(needs))...)
	if o.FieldMap != nil {
		objs = append(objs, &corev1.ConfigMap{TypeMeta: typeMeta("v1", "ConfigMap"), ObjectMeta: meta(Name+"-fieldmap", o.Namespace),
			Data: map[string]string{fieldMapKey: string(o.FieldMap)}})
	}
	objs = append(objs, deployment(o))
	if w := o.Webhook; w != nil {
		objs = append(objs, webhookObjects(o.Namespace, o.Image, *w)...)
	}

	var b bytes.Buffer
	if o.CRD != nil {
		b.Write(o.CRD)
		if !bytes.HasSuffix(o.CRD, []byte("\n")) {
			b.WriteByte('\n')
		}
		b.WriteString("---\n")
	}
	for i, obj := range objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, fmt.Errorf("render %T: %w", obj, err)
		}
		delete(u, "status") // written by the cluster, never by a manifest
		data, err := yaml.Marshal(pruneEmpty(u))
		if err != nil {
			return nil, fmt.Errorf("render %T: %w", obj, err)
		}
		b.Write(data)
	}
	return b.Bytes(), nil
}

// rbac turns the rules into roles. Cluster-scoped resources need a ClusterRole; namespaced
// ones go into a ClusterRole only when every namespace is watched, otherwise into a Role in
// the watched namespace; the leader Lease lives in the controller's own namespace, never the
// watched one (Render).
func rbac(account string, lbl map[string]string, namespace, watchNamespace string, rules []access.Rule) []any {
	var cluster, watched, own []rbacv1.PolicyRule
	for _, r := range rules {
		pr := rbacv1.PolicyRule{APIGroups: []string{r.Group}, Resources: []string{r.Resource}, Verbs: r.Verbs, ResourceNames: r.Names}
		switch {
		case r.Cluster:
			cluster = append(cluster, pr)
		case r.Own:
			own = append(own, pr)
		case watchNamespace == "":
			cluster = append(cluster, pr)
		default:
			watched = append(watched, pr)
		}
	}
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: namespace}}
	m := func(name, ns string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbl}
	}
	var out []any
	if len(cluster) > 0 {
		// Cluster-scoped names carry the namespace, so that installs in several namespaces
		// (one per tenant, say) do not overwrite each other's bindings.
		name := account
		if namespace != DefaultNamespace {
			name = account + "-" + namespace
		}
		out = append(out,
			&rbacv1.ClusterRole{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"), ObjectMeta: m(name, ""), Rules: cluster},
			&rbacv1.ClusterRoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), ObjectMeta: m(name, ""),
				RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name}, Subjects: subject})
	}
	role := func(ns string, rules []rbacv1.PolicyRule) []any {
		return []any{
			&rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: m(account, ns), Rules: rules},
			&rbacv1.RoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: m(account, ns),
				RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: account}, Subjects: subject},
		}
	}
	if len(watched) > 0 {
		out = append(out, role(watchNamespace, watched)...)
	}
	if len(own) == 0 {
		return out
	}
	return append(out, role(namespace, own)...)
}

func deployment(o Options) *appsv1.Deployment {
	args := []string{"run", "--leader-elect",
		"--api-version=" + o.GVR.GroupVersion().String(), "--resource=" + o.GVR.Resource,
		fmt.Sprintf("--metrics-addr=:%d", MetricsPort), fmt.Sprintf("--health-addr=:%d", HealthPort), "--log-format=json"}
	if o.WatchNamespace != "" {
		args = append(args, "--namespace="+o.WatchNamespace)
	}
	// An argument, not VMC_SELECTOR: the pods run with it from the first one on, and no
	// variable set on the Deployment later overrides it.
	if o.Selector != "" {
		args = append(args, "--selector="+o.Selector)
	}
	if !o.WatchNodes {
		args = append(args, "--watch-nodes=false")
	}
	if !o.WatchCRD {
		args = append(args, "--watch-crd=false")
	}
	if !o.Usage {
		args = append(args, "--usage-interval=0")
	}
	if !o.Disks {
		args = append(args, "--root-disk=ephemeral")
	}
	var mounts []corev1.VolumeMount
	var volumes []corev1.Volume
	if o.FieldMap != nil {
		args = append(args, "--schema-file="+fieldMapDir+"/"+fieldMapKey)
		mounts = []corev1.VolumeMount{{Name: "fieldmap", MountPath: fieldMapDir, ReadOnly: true}}
		volumes = []corev1.Volume{{Name: "fieldmap", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: Name + "-fieldmap"}}}}}
	}
	args = append(args, o.Args...)
	probe := func(path string, period int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("health")}},
			PeriodSeconds: period, FailureThreshold: 3}
	}
	res := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	return &appsv1.Deployment{
		TypeMeta:   typeMeta("apps/v1", "Deployment"),
		ObjectMeta: meta(Name, o.Namespace),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(o.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": Name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels()},
				Spec: corev1.PodSpec{
					ServiceAccountName: Name,
					Volumes:            volumes,
					// Longer than the default --shutdown-timeout (30s), so a drain completes.
					TerminationGracePeriodSeconds: ptr.To(int64(40)),
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)), RunAsGroup: ptr.To(int64(65532)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					// Replicas on different nodes, so that one node's loss leaves a standby.
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
						Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
							LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": Name}}}}}}},
					Containers: []corev1.Container{{
						Name:  Name,
						Image: o.Image,
						// Said, not left to the kubelet, whose default for a :latest image is
						// Always: an image loaded onto the nodes (kind load image-archive) runs
						// whatever its tag. The default image's tag names a release or a
						// commit, which a pull would not change.
						ImagePullPolicy: corev1.PullIfNotPresent,
						Args:            args,
						Env:             []corev1.EnvVar{fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_NAMESPACE", "metadata.namespace")},
						Ports:           []corev1.ContainerPort{{Name: "metrics", ContainerPort: MetricsPort}, {Name: "health", ContainerPort: HealthPort}},
						VolumeMounts:    mounts,
						LivenessProbe:   probe("/healthz", 10),
						ReadinessProbe:  probe("/readyz", 5),
						Resources:       corev1.ResourceRequirements{Requests: res("100m", "128Mi"), Limits: res("1", "512Mi")},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							RunAsNonRoot: ptr.To(true), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					}},
				},
			},
		},
	}
}

// webhookObjects are the conversion webhook's ServiceAccount, RBAC (access.WebhookRules),
// Service, Deployment and, for more than one replica, PodDisruptionBudget, in the namespace of
// the controller and from the same image. Its objects carry labels of their own
// (app.kubernetes.io/name: the Service's name), so that neither Deployment's selector matches
// the other's pods.
func webhookObjects(ns, image string, w Webhook) []any {
	lbl := webhookLabels(w.Service)
	m := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbl} }
	selector := map[string]string{"app.kubernetes.io/name": w.Service}
	objs := []any{&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: m(w.Service), AutomountServiceAccountToken: ptr.To(true)}}
	// Own rules (the Secret) land in a Role of ns; the CRD rule in a ClusterRole.
	objs = append(objs, rbac(w.Service, lbl, ns, ns, access.WebhookRules(access.Webhook{Secret: w.Secret, CRD: w.CRD}))...)
	objs = append(objs, &corev1.Service{TypeMeta: typeMeta("v1", "Service"), ObjectMeta: m(w.Service),
		Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Name: "https", Port: w.Port, TargetPort: intstr.FromString("https")}}}})
	probe := func(path string, period int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("https"), Scheme: corev1.URISchemeHTTPS}},
			PeriodSeconds: period, FailureThreshold: 3}
	}
	// The drain, then the reviews in flight, then a few seconds for the process to exit:
	// the kubelet's SIGKILL must not cut the drain short.
	grace := int64((w.ShutdownDelay + w.ShutdownTimeout + 5*time.Second + time.Second - 1) / time.Second)
	res := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	objs = append(objs, &appsv1.Deployment{
		TypeMeta:   typeMeta("apps/v1", "Deployment"),
		ObjectMeta: m(w.Service),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(w.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{
					ServiceAccountName:            w.Service,
					TerminationGracePeriodSeconds: ptr.To(grace),
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)), RunAsGroup: ptr.To(int64(65532)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					// Every read in a version other than the stored one goes through a
					// replica: spread them, so that one node's loss leaves one serving.
					// Preferred, not required: with required, a rollout's surge pod would need
					// a node free of every replica, and with no more nodes than replicas the
					// rollout would never end. The budget below holds a drain instead.
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
						Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
							LabelSelector: &metav1.LabelSelector{MatchLabels: selector}}}}}},
					Containers: []corev1.Container{{
						Name:            "webhook",
						Image:           image,
						ImagePullPolicy: corev1.PullIfNotPresent, // as the controller's
						// Its namespace (of the Service and the Secret) is the pod's own, from
						// the downward API, so it follows the objects wherever they are applied.
						// --shutdown-delay is said, not left to the image, so that it is the
						// one the grace period covers.
						Args: []string{"webhook", fmt.Sprintf("--listen=:%d", WebhookListenPort), "--secret=" + w.Secret, "--crd=" + w.CRD,
							"--shutdown-delay=" + w.ShutdownDelay.String()},
						// GOMEMLIMIT has Go's collector work harder near it rather than let the
						// heap grow to twice what is live (GOGC), which with reviews of many
						// megabytes one after another overshoots the memory limit even when
						// only one is handled at a time. 200MiB leaves the rest of the 256Mi
						// limit to the binary's mapped pages (~30 MiB) and a margin;
						// --max-review-bytes-in-flight keeps what is live well under it
						// (docs/dev/benchmarks.md has the figures).
						Env:            []corev1.EnvVar{fieldEnv("POD_NAMESPACE", "metadata.namespace"), {Name: "GOMEMLIMIT", Value: "200MiB"}},
						Ports:          []corev1.ContainerPort{{Name: "https", ContainerPort: WebhookListenPort}},
						LivenessProbe:  probe("/healthz", 10),
						ReadinessProbe: probe("/readyz", 5),
						Resources:      corev1.ResourceRequirements{Requests: res("50m", "64Mi"), Limits: res("500m", "256Mi")},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							RunAsNonRoot: ptr.To(true), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					}},
				},
			},
		},
	})
	if w.Replicas < 2 {
		// A budget of one available out of one would refuse every eviction, and hold every
		// drain of its node for good.
		return objs
	}
	// A drain evicts one replica at a time and waits for its replacement to be Ready, rather
	// than evicting every replica on the node, or both at once from two nodes drained
	// together, and leaving the API server no webhook to convert with. A pod that is not
	// Ready serves nothing, so it may always go (AlwaysAllow): replicas that all crash-loop
	// hold no drain.
	return append(objs, &policyv1.PodDisruptionBudget{TypeMeta: typeMeta("policy/v1", "PodDisruptionBudget"), ObjectMeta: m(w.Service),
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: selector},
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow)}})
}

// fieldEnv is an environment variable set from the pod's own fields (the downward API).
func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

func webhookLabels(name string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/component": "webhook", "app.kubernetes.io/part-of": Name}
}

// pruneEmpty drops empty objects (spec: {}, strategy: {}) that typed structs leave behind,
// so the manifests show only what is set.
func pruneEmpty(m map[string]any) map[string]any {
	for k, v := range m {
		if child, ok := v.(map[string]any); ok {
			if len(pruneEmpty(child)) == 0 {
				delete(m, k)
			}
		}
	}
	return m
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func labels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": Name, "app.kubernetes.io/component": "controller"}
}

func meta(name, ns string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels()}
}
