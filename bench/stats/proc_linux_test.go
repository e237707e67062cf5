package stats

import "testing"

func TestUserHZ(t *testing.T) {
	// USER_HZ is 100 on every Linux architecture Go supports.
	if hz := userHZ(); hz != 100 {
		t.Errorf("userHZ() = %d, want 100 from AT_CLKTCK", hz)
	}
}
