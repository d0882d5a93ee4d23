// Command gpufleet-sim is gpufleet's command line with the simulator's
// plots: `gpufleet-sim sim packing ... --plot alloc.svg` draws allocation
// against arrived demand, one line per policy; every other verb is
// gpufleet's. It is a binary of its own so that the server's binary links
// no plotting library: gonum/plot and its fonts add about 7 MB, a tenth,
// to the stripped server binary (docs/ARCHITECTURE.md, "What moved").
//
// It imports cli and sim/plot only.
package main
