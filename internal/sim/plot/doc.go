// Package plot draws the simulator's packing experiment: allocation
// against arrived demand, one line per policy. It is the one package that
// links gonum/plot (and its fonts); only cmd/gpufleet-sim imports it, so
// that the server's binary goes without them.
//
// It imports sim (the experiment's curves), sched (the policies' names)
// and gonum/plot.
package plot
