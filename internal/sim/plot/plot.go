package plot

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/sim"
)

// palette gives each policy line its own colour; it wraps after eight.
var palette = []color.Color{
	color.RGBA{31, 119, 180, 255},
	color.RGBA{214, 39, 40, 255},
	color.RGBA{44, 160, 44, 255},
	color.RGBA{255, 127, 14, 255},
	color.RGBA{148, 103, 189, 255},
	color.RGBA{140, 86, 75, 255},
	color.RGBA{227, 119, 194, 255},
	color.RGBA{23, 190, 207, 255},
}

// Allocation draws the allocation ratio (%) against the arrived demand
// (%), one line per policy averaged over its seeds (MeanCurves), and writes
// it to w in format, "svg" or "png". The runs must carry their Curve.
func Allocation(w io.Writer, format, title string, runs []sim.PackingRun) error {
	if format != "svg" && format != "png" {
		return fmt.Errorf("plot format %q: want svg or png", format)
	}
	lines := sim.MeanCurves(runs)
	if len(lines) == 0 {
		return fmt.Errorf("plot: no run has a curve")
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "arrived GPU demand (% of capacity)"
	p.Y.Label.Text = "GPU allocation ratio (%)"
	// The policies differ where the cluster fills up: show arrived demand
	// from 60% (when the curves go beyond 80%), and allocations from a
	// little below the lowest one there.
	p.X.Min, p.Y.Min = 0, 0
	if zoom := 60.0; lastArrived(lines) > 80 {
		p.X.Min = zoom
		low := 100.0
		for _, l := range lines {
			for j, x := range l.Arrived {
				if x >= zoom {
					low = min(low, l.Allocation[j])
				}
			}
		}
		p.Y.Min = max(0, low-5)
	}
	p.Legend.Top, p.Legend.Left = false, false // bottom right: below the curves
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(-8), vg.Points(8)
	p.Add(plotter.NewGrid())

	// The diagonal is the most any policy can place: all that arrived.
	// Allocation cannot pass 100%: the diagonal stops there.
	top := min(lastArrived(lines), 100)
	p.Y.Max = 101
	ideal, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: p.X.Min}, {X: top, Y: top}})
	if err != nil {
		return err
	}
	ideal.Color = color.Gray{Y: 160}
	ideal.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(ideal)
	p.Legend.Add("all arrived demand placed", ideal)

	for i, l := range lines {
		var xys plotter.XYs
		for j := range l.Arrived {
			if l.Arrived[j] >= p.X.Min {
				xys = append(xys, plotter.XY{X: l.Arrived[j], Y: l.Allocation[j]})
			}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("plot %s: %w", l.Policy, err)
		}
		line.Color = palette[i%len(palette)]
		line.Width = vg.Points(1.5)
		if i >= len(palette) {
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(2)}
		}
		if l.Policy == sched.PackGPUFleet {
			line.Width = vg.Points(2.5)
		}
		p.Add(line)
		p.Legend.Add(l.Policy, line)
	}

	wt, err := p.WriterTo(8*vg.Inch, 5*vg.Inch, format)
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

// lastArrived is the largest arrived demand of the lines (percent).
func lastArrived(lines []sim.CurveLine) float64 {
	top := 0.0
	for _, l := range lines {
		if n := len(l.Arrived); n > 0 {
			top = max(top, l.Arrived[n-1])
		}
	}
	return top
}
