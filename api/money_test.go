package api

import (
	"strings"
	"testing"
)

// TestBadAmountNamesItsField: an amount with too many decimals, or too
// large, is refused naming its field.
func TestBadAmountNamesItsField(t *testing.T) {
	for body, field := range map[string]string{`{"pool":"a","rate":1.0000001}`: "rate", `{"pool":"a","cpuCoreHour":1e30}`: "cpuCoreHour"} {
		var p Price
		err := DecodeProblem(DecodeStrict([]byte(body), &p))
		if err == nil || !strings.HasPrefix(err.Error(), field+": ") {
			t.Errorf("%s: %v, want a problem naming %s", body, err, field)
		}
	}
}
