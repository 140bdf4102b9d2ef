// Package access lists the API permissions vm-controller uses, each with the reason it is
// needed. It is the single source for the RBAC rules the manifests command prints and for the
// access review the check command performs, so the two cannot disagree with the code.
package access

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/crds"
)

// Rule is one permission: verbs on a resource of an API group.
type Rule struct {
	Group    string   // "" for the core group
	Resource string   // plural, with "/subresource" when it is one
	Verbs    []string // exact verbs, never "*"
	Names    []string // the only objects it applies to (RBAC resourceNames); nil: all
	Cluster  bool     // the resource is cluster-scoped (needs a ClusterRole)
	Own      bool     // in the controller's own namespace only (the leader Lease)
	Why      string   // what the controller does with it
	// Degrades are those of Verbs without which the controller works all the same, less well,
	// as Without says: the manifests grant them, and a check that finds them denied warns
	// rather than fails, so that an install whose RBAC predates them keeps running.
	Degrades []string
	Without  string
}

// Needs describes a deployment: which resource it manages and which optional features it
// runs with.
type Needs struct {
	GVR         schema.GroupVersionResource // the VirtualMachine resource
	WatchNodes  bool                        // --watch-nodes
	LeaderElect bool                        // --leader-elect
	WatchCRD    bool                        // --watch-crd: reads and follows the resource's CRD
	Usage       bool                        // --usage-interval > 0: samples usage from metrics.k8s.io
	Disks       bool                        // --root-disk claim: a PersistentVolumeClaim per VM (else only the ones left from it)
	Namespace   string                      // --namespace: the one namespace watched; "" for all
}

// Rules returns every permission a controller with these needs uses.
func Rules(n Needs) []Rule {
	g, r := n.GVR.Group, n.GVR.Resource
	rules := []Rule{
		{Group: g, Resource: r, Verbs: []string{"list", "watch"}, Why: "the informer caches the VMs"},
		{Group: g, Resource: r, Verbs: []string{"patch"}, Why: "adds and removes the cleanup finalizer"},
		{Group: g, Resource: r + "/status", Verbs: []string{"patch"}, Why: "writes the status"},
		{Group: g, Resource: r + "/finalizers", Verbs: []string{"update"}, Why: "lets server pods block their VM's deletion (ownerReferences with blockOwnerDeletion)"},
		{Group: "", Resource: "pods", Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}, Why: "creates, watches and deletes the server pods; get reads a pod whose name is taken, or that the cache does not show yet; patch records the cpu and memory a server was made for (cloudnative.czs/resources)",
			Degrades: []string{"patch"}, Without: "a VM set to the cpu and memory admission gave its running server replaces the server once, where the record would keep it"},
		{Group: "", Resource: "pods/resize", Verbs: []string{"patch"}, Why: "changes a running server's cpu and memory in place (in-place pod resize)"},
		{Group: "events.k8s.io", Resource: "events", Verbs: []string{"create", "patch"}, Why: "records Events on VMs; patch updates a repeating event's series"},
		{Group: "policy", Resource: "poddisruptionbudgets", Verbs: []string{"get", "list", "watch", "create", "patch", "delete"},
			Why: "keeps a PodDisruptionBudget over the server of each VM whose eviction strategy is Block, so that a drain waits for it; get reads a budget whose name is taken; patch adopts one an earlier VM of the name left behind, and records the VM's kind on one an earlier version made"},
	}
	// The namespaces: the one watched when there is one (its name field-selected).
	namespaces := Rule{Group: "", Resource: "namespaces", Verbs: []string{"list", "watch"}, Cluster: true,
		Why: "leaves the VMs of a namespace being deleted to that deletion: no server made again, no status written, only the finalizer removed"}
	if n.Namespace != "" {
		namespaces.Names = []string{n.Namespace}
	}
	rules = append(rules, namespaces)
	if n.Disks {
		rules = append(rules,
			Rule{Group: "", Resource: "persistentvolumeclaims", Verbs: []string{"get", "list", "watch", "create", "patch", "delete"},
				Why: "creates, watches, grows, keeps and deletes each VM's disk (--root-disk claim); get reads a claim whose name is taken, or a deleted VM's claim the cache does not show"},
			Rule{Group: "storage.k8s.io", Resource: "storageclasses", Verbs: []string{"list", "watch"}, Cluster: true,
				Why: "tells whether a disk's StorageClass lets it grow (allowVolumeExpansion), and which class is the default (check)"},
			Rule{Group: "", Resource: "events", Verbs: []string{"list", "watch"},
				Why: "reads the Events on claims (field-selected) to say why a VM's disk is not bound"})
		// Placement: a migration is refused for a disk bound to its node (a local volume), and
		// the room check of a move or a replacement counts only the nodes the disk can be
		// reached from (the volume's node affinity).
		rules = append(rules, Rule{Group: "", Resource: "persistentvolumes", Verbs: []string{"get"}, Cluster: true,
			Why: "tells, when a migration is asked for, or a running server is to be replaced or resized for a new spec, whether a VM's disk is bound to its node (a local volume) and cannot follow it, and which nodes it can be reached from (its node affinity)"})
	} else {
		rules = append(rules, Rule{Group: "", Resource: "persistentvolumeclaims", Verbs: []string{"get", "list", "watch", "patch", "delete"},
			Why: "keeps or deletes, as its VM's reclaim policy says, a disk made under --root-disk claim before (--root-disk ephemeral makes none); get reads a deleted VM's claim the cache does not show"})
	}
	if n.Usage {
		rules = append(rules, Rule{Group: "metrics.k8s.io", Resource: "pods", Verbs: []string{"get", "list"},
			Why:      "samples the usage of each Active VM's server pod for status.server.usage",
			Degrades: []string{"list"}, Without: "usage is read one request per VM, at most --usage-qps a second, where one list serves every VM"})
	}
	if n.WatchNodes {
		rules = append(rules, Rule{Group: "", Resource: "nodes", Verbs: []string{"list", "watch"}, Cluster: true,
			Why: "tells a server on a lost node (node not Ready, or gone) from a running one"})
	}
	if n.LeaderElect {
		rules = append(rules, Rule{Group: "coordination.k8s.io", Resource: "leases", Verbs: []string{"get", "create", "update"}, Own: true,
			Why: "leader election: only the holder of the Lease reconciles"})
	}
	if n.WatchCRD {
		rules = append(rules, Rule{Group: crds.GVR.Group, Resource: crds.GVR.Resource, Verbs: []string{"get", "list", "watch"}, Cluster: true,
			Names: []string{crds.Name(n.GVR)},
			Why:   "checks the VM resource's CRD (status subresource, schema) and notices when it goes or comes back; this CRD only"})
	}
	return rules
}

// Webhook describes the conversion webhook (`vm-controller webhook`) with self-managed
// certificates: the one Secret it keeps them in, in its own namespace, and the one CRD whose
// caBundle it sets. Its permissions are a set of their own, granted to its own
// ServiceAccount, so that the controller never holds a Secret and the webhook never holds a
// VM or a pod.
type Webhook struct {
	Secret string // name of the Secret with the CA and serving certificate
	CRD    string // name of the CRD whose spec.conversion.webhook.clientConfig.caBundle it sets
}

// WebhookRules returns every permission the webhook uses. Its Secret rules are Own: they
// apply in the webhook's own namespace, where its Service is.
func WebhookRules(w Webhook) []Rule {
	return []Rule{
		{Group: "", Resource: "secrets", Verbs: []string{"get", "update"}, Own: true, Names: []string{w.Secret},
			Why: "reads the CA and serving certificate the replicas share, and renews them with a resourceVersion precondition; this Secret only"},
		// RBAC cannot limit create to a name: the authoriser sees a create before the object
		// has one. The rule is as narrow as RBAC allows: Secrets of the webhook's namespace.
		{Group: "", Resource: "secrets", Verbs: []string{"create"}, Own: true,
			Why: "creates the certificates' Secret the first time a replica starts (RBAC cannot limit create to a name)"},
		{Group: crds.GVR.Group, Resource: crds.GVR.Resource, Verbs: []string{"get", "list", "watch", "patch"}, Cluster: true, Names: []string{w.CRD},
			Why: "reads the CRD's conversion settings and sets its caBundle before a new certificate is served, and watches the CRD (field-selected by name) to set it as soon as the CRD gains webhook conversion or loses the caBundle; this CRD only"},
	}
}
