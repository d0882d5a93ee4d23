// Package usage samples how much of their GPUs the workloads really use,
// and keeps the latest samples and a history of the cluster for the API,
// the metrics and idle reclaim.
//
// Three samplers exist, and Multi merges the samples of several:
//
//   - Nvidia runs nvidia-smi (--query-gpu and --query-compute-apps, as argv,
//     never through a shell, under a timeout) and maps each GPU process to a
//     workload through the process table: a process belongs to the task
//     whose supervisor's session, or whose process group, it is in.
//   - Sim serves simulated GPUs: the local executor gives each task the path
//     of a file in $GPUFLEET_SIM_USAGE_FILE, and the workload writes its own
//     figures there ("utilization=0.8 memoryMiB=2048"). No file, or an
//     unreadable one, means utilisation 0 and memory 0.
//   - DCGM reads an NVIDIA DCGM exporter's metrics (GPU utilisation and
//     framebuffer used, per node and device) for the Kubernetes executor,
//     whose pods' processes gpufleet cannot see.
//
// Point (the cluster totals of one sample) and the parsers are pure; the
// samplers do I/O; the Tracker, which keeps the latest samples, the
// cluster's history and each workload's, in memory only, is safe for
// concurrent use. The package imports core, and prometheus/common and
// prometheus/client_model to parse the exporter's text format.
package usage
