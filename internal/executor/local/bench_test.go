package local_test

import (
	"fmt"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor/local"
)

// BenchmarkStartAndExit measures one task's whole life (`true`) through the
// supervisor, confined as far as the machine allows and unconfined, to
// show what the sandbox costs.
func BenchmarkStartAndExit(b *testing.B) {
	for _, iso := range []struct {
		name string
		opts local.Isolation
	}{{"isolated", local.Isolation{}}, {"unconfined", local.Isolation{Disabled: true}}} {
		b.Run(iso.name, func(b *testing.B) {
			e, err := local.New(local.Options{DataDir: b.TempDir(), Isolation: iso.opts})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { e.Close() })
			b.Logf("isolation: %s", e.Isolation())
			for i := 0; b.Loop(); i++ {
				tk := task(core.WorkloadID(fmt.Sprintf("bench-%d", i)), "true")
				tk.Team = "ta"
				if err := e.Start(b.Context(), tk); err != nil {
					b.Fatal(err)
				}
				if x := <-e.Exits(); x.ExitCode == nil || *x.ExitCode != 0 {
					b.Fatalf("exit %+v", x)
				}
			}
		})
	}
}
