package reconcile

import (
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// WarningsOnly records the Warning events of r and drops the Normal ones (CreatingServer,
// ServerReady and the like). Every event is an object the API server writes to etcd; at many
// VMs, two Normal events per VM brought to Active are a measurable part of what the API server
// does (docs/dev/benchmarks.md), while the status already says the same. What went wrong (a failed or
// missing server, an invalid spec, a lost node) is still recorded.
func WarningsOnly(r events.EventRecorder) events.EventRecorder { return warningsOnly{r} }

type warningsOnly struct{ r events.EventRecorder }

func (w warningsOnly) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if eventtype == decision.EventWarning {
		w.r.Eventf(regarding, related, eventtype, reason, action, note, args...)
	}
}
