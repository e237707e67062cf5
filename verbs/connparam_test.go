package verbs

import "testing"

func TestConnParamWithDefaults(t *testing.T) {
	caps := Caps{MaxQPRdAtom: 8, MaxQPInitRdAtom: 128}
	got := ConnParam{}.WithDefaults(caps)
	want := ConnParam{ResponderResources: DefaultConnDepth, InitiatorDepth: 8, RetryCount: 7, RNRRetryCount: 7}
	if got.ResponderResources != want.ResponderResources || got.InitiatorDepth != want.InitiatorDepth ||
		got.RetryCount != 7 || got.RNRRetryCount != 7 {
		t.Errorf("zero ConnParam: %+v, want %+v", got, want)
	}
	got = ConnParam{ResponderResources: 200, InitiatorDepth: 2, RetryCount: 9, RNRRetryCount: 3}.WithDefaults(caps)
	if got.ResponderResources != 128 || got.InitiatorDepth != 2 || got.RetryCount != 7 || got.RNRRetryCount != 3 {
		t.Errorf("explicit ConnParam: %+v: want IRD clamped to 128, ORD 2, retry 7, RNR retry 3", got)
	}
}
