package core

import (
	"testing"
	"time"
)

// A clone shares nothing with the original: changing one's times, exit
// code or lists leaves the other as it was.
func TestWorkloadCloneIsDeep(t *testing.T) {
	start, end, code := time.Unix(10, 0), time.Unix(20, 0), 3
	w := &Workload{Spec: Spec{Command: []string{"a"}}, Status: Status{StartedAt: &start, FinishedAt: &end, ExitCode: &code}}
	c := w.Clone()
	*c.Status.StartedAt = time.Unix(99, 0)
	*c.Status.FinishedAt = time.Unix(99, 0)
	*c.Status.ExitCode = 9
	c.Command[0] = "b"
	if !w.Status.StartedAt.Equal(time.Unix(10, 0)) || !w.Status.FinishedAt.Equal(time.Unix(20, 0)) || *w.Status.ExitCode != 3 || w.Command[0] != "a" {
		t.Errorf("the original changed with its clone: %+v", w)
	}
}
