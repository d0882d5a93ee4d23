package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	descVolumeSize = prometheus.NewDesc("gpufleet_volume_size_bytes",
		"Size asked for a team volume (counted against the team's storage limit, billed).",
		[]string{"team", "volume"}, nil)
	descVolumeUsed = prometheus.NewDesc("gpufleet_volume_used_bytes",
		"What a team volume held at its last measure (absent before the first, and on Kubernetes).",
		[]string{"team", "volume"}, nil)
)

// storageCollector reads the team volumes at scrape time.
type storageCollector struct {
	opts Options
}

func (c *storageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descVolumeSize
	ch <- descVolumeUsed
}

func (c *storageCollector) Collect(ch chan<- prometheus.Metric) {
	if c.opts.Volumes == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	vs, err := c.opts.Volumes(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descVolumeSize, err)
		return
	}
	for _, v := range vs {
		ch <- prometheus.MustNewConstMetric(descVolumeSize, prometheus.GaugeValue, float64(v.SizeBytes), string(v.Team), v.Name)
		if v.UsedBytes >= 0 {
			ch <- prometheus.MustNewConstMetric(descVolumeUsed, prometheus.GaugeValue, float64(v.UsedBytes), string(v.Team), v.Name)
		}
	}
}
