package decision

// What the fuzz checks (package decision_test) ask of the decision's insides.
var (
	Running  = running
	UnderWay = underWay
	AtRest   = atRest
	RoomKept = roomKeptRecord
)

// FromAdmission is fromAdmission, for TestFromAdmission.
var FromAdmission = fromAdmission
