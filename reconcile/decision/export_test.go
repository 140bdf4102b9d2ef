package decision

// What the fuzz checks and the tests of package decision_test ask of the decision's insides.
var (
	Running  = running
	UnderWay = underWay
	AtRest   = atRest
	RoomKept = roomKeptRecord
	// GrowthRefusedState is the growth state of a disk whose growth the API server refused.
	GrowthRefusedState = growthRefused
)
