// Command gpufleet-cuda-probe initialises CUDA the way every CUDA program
// does, through the driver's libcuda.so.1, and prints what happened as one
// line of JSON (internal/health reads it: ParseCUDAProbe). Qualification
// runs it inside the sandbox, exactly as a workload runs, so that a node
// whose sandbox keeps CUDA from starting fails qualification instead of
// taking work that would all fail.
//
// It is a helper of its own because loading a shared library needs the
// dynamic loader, which the server binary, statically linked, does without;
// it uses purego, so it builds without a C compiler. Install it beside the
// server binary (go build -o <dir of gpufleet>/gpufleet-cuda-probe
// ./cmd/gpufleet-cuda-probe).
//
// Exit status: 0 when cuInit and cuDeviceGetCount succeeded, 1 when the
// library could not be loaded or a call failed.
//
// It imports purego only (and the standard library).
package main
