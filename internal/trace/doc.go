// Package trace reads cluster traces into gpufleet's domain types, for the
// simulator and benchmarks. It reads the Alibaba GPU-sharing trace v2023
// ("openb", from the FGD paper, USENIX ATC'23) as published: a node list
// (sn,cpu_milli,memory_mib,gpu,model) and a pod list (name,cpu_milli,
// memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
// deletion_time,scheduled_time). The trace itself is not part of the
// repository; tools take its path as a flag.
//
// trace imports core only, and does no I/O beyond the readers it is given.
package trace
