package decision_test

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// migrationEvents checks the Events of a migration's outcome and returns evs without them: a
// Warning MigrationRefused exactly when the status records a new refusal, a Normal Migrated
// exactly when it records a new success, and a migration record that only ever moves on to a
// newer request or a later phase of the same one.
func migrationEvents(fail func(string, ...any), current, st schema.Status, evs []decision.Event) []decision.Event {
	was, now := current.Migration, st.Migration
	if was != nil && now == nil {
		fail("the migration record %+v is dropped", *was)
	}
	fresh := func(phase schema.MigrationPhase) bool {
		return now != nil && now.Phase == phase && (was == nil || !was.Same(now))
	}
	for _, c := range []struct {
		reason, typ string
		want        bool
	}{
		{decision.ReasonMigrationRefused, corev1.EventTypeWarning, fresh(schema.MigrationRefused)},
		{decision.ReasonMigrated, corev1.EventTypeNormal, fresh(schema.MigrationSucceeded)},
	} {
		i := slices.IndexFunc(evs, func(e decision.Event) bool { return e.Reason == c.reason })
		switch {
		case c.want && i < 0:
			fail("the migration record %+v without a %s event", *now, c.reason)
		case !c.want && i >= 0:
			fail("a %s event %+v without a new record of it", c.reason, evs[i])
		case i >= 0:
			if evs[i].Type != c.typ || slices.ContainsFunc(evs[i+1:], func(e decision.Event) bool { return e.Reason == c.reason }) {
				fail("%s events %+v: want one, %s", c.reason, evs, c.typ)
			}
			evs = slices.Delete(slices.Clone(evs), i, i+1)
		}
	}
	return evs
}

// movingOff reports whether the status records a migration under way off node.
func movingOff(st schema.Status, node string) bool {
	m := st.Migration
	return m != nil && m.Phase == schema.MigrationMoving && m.SourceNode == node
}
