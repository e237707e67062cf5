package iwarp

// RaceSync orders the caller with the engines' socket traffic for the race
// detector (see race_on.go). The cross-process conformance peer calls it
// around each RPC: its pipe carries causality the detector cannot see.
func RaceSync() {
	raceAcquire()
	raceRelease()
}

// FeatureFinal is the capability bit of the Final notice (wireext.go).
const FeatureFinal = featureFinal

// OpFinal is the Final notice's RDMAP opcode (on QN 2).
const OpFinal = opFinal

// FeaturePlaced is the capability bit of the Placed notice (wireext.go).
const FeaturePlaced = featurePlaced

// OpPlaced is the Placed notice's RDMAP opcode (on QN 2).
const OpPlaced = opPlaced
