package testwait

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

func TestWithinChecksUntilDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		began, checks := time.Now(), 0
		saw, ok := Within(time.Second, func() (bool, string) {
			checks++
			return checks == 5, fmt.Sprint(checks)
		})
		// Checks at 0, then 1, 2, 4 and 8 ms after the one before.
		if !ok || saw != "5" || time.Since(began) != 15*time.Millisecond {
			t.Errorf("Within: %q %v after %s, want done at the 5th check, 15ms after the first", saw, ok, time.Since(began))
		}
	})
}

func TestWithinGivesUpAtTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		began, checks := time.Now(), 0
		saw, ok := Within(time.Second, func() (bool, string) { checks++; return false, "never" })
		if ok || saw != "never" || time.Since(began) != time.Second {
			t.Errorf("Within: %q %v after %s, want not done, after the timeout (1s)", saw, ok, time.Since(began))
		}
		// At 0, 1, 3, 7, 15, 31, 63 and 127 ms, every 100 ms from 227 to 927,
		// and at 1 s.
		if checks != 17 {
			t.Errorf("%d checks in 1s, want 17: intervals doubling from 1ms to 100ms", checks)
		}
	})
}
