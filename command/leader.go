// Leader election's wiring: the Lease and this replica's name in it, from run's flags. The
// election and the write fence are package leader's.

package command

import (
	"crypto/rand"
	"encoding/hex"
	"os"

	"github.com/cloudnative-czs/vm-controller/leader"
)

// election is the leader election run's flags ask for, in leaseNamespace, telling f of each
// renewal.
func (c *runConfig) election(leaseNamespace string, f *leader.Fence) leader.Election {
	e := leader.Election{Name: c.LeaseName, Namespace: leaseNamespace, Identity: c.HolderIdentity,
		Lease: c.LeaseDuration, Renew: c.RenewDeadline, Retry: c.RetryPeriod, Fence: f}
	if e.Identity == "" {
		e.Identity = defaultIdentity()
	}
	return e
}

// defaultIdentity names this replica in the Lease: the pod's name when it runs in a pod (so
// `kubectl get lease` points at it), else the host name; a random suffix keeps two processes
// on one host apart.
func defaultIdentity() string {
	host := os.Getenv("POD_NAME")
	if host == "" {
		host, _ = os.Hostname()
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return host + "_" + hex.EncodeToString(b)
}
