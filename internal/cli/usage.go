package cli

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
)

func newUsageCmd(e *env) *cobra.Command {
	var out *outputFlag
	var window time.Duration
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show the cluster's GPU use over time: allocated, really used, idle, queue",
		Long: `Print the cluster's totals at each sample of the last --window (one point
per sample interval, 10 s by default, oldest first): GPUs, GPUs allocated
(fractions count), GPUs really used (the sum of the sampled utilisation),
GPUs with nothing allocated, running and pending workloads, and the mean wait
of the pending ones. Any user may read it: it names no team.

-o json prints the API's answer: {"points": [...], "intervalSeconds": 10}.`,
		Example: `  gpufleet usage
  gpufleet usage --window 6h -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if window < 0 || window > 24*time.Hour {
				return usagef("--window %s: want a duration up to 24h", window)
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			h, err := c.Usage(cmd.Context(), window)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, h); ok {
				return err
			}
			return printUsage(e, h)
		},
	}
	cmd.Flags().DurationVar(&window, "window", time.Hour, "how far back, at most 24h")
	out = addOutputFlag(cmd, outTable, outJSON, outYAML)
	return cmd
}

func printUsage(e *env, h *api.UsageHistory) error {
	t := newTable(e.stdout, "TIME", "GPUS", "ALLOCATED", "USED", "IDLE", "RUNNING", "PENDING", "QUEUE-WAIT")
	for _, p := range h.Points {
		t.row(p.Time.Local().Format("15:04:05"), strconv.Itoa(p.GPUs), fmt.Sprintf("%.2f", p.AllocatedGPUs), fmt.Sprintf("%.2f", p.UsedGPUs),
			strconv.Itoa(p.IdleGPUs), strconv.Itoa(p.Running), strconv.Itoa(p.Pending), (time.Duration(p.QueueWaitSeconds * float64(time.Second))).Round(time.Second).String())
	}
	if len(h.Points) == 0 {
		fmt.Fprintln(e.stderr, "no samples yet (is usage.sampleInterval 0?)")
	}
	return t.flush()
}
