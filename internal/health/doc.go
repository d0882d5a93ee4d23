// Package health reads what a GPU node's qualification commands print,
// classifies the driver's Xid events, decides a node's qualification
// verdict, and prints simulated outputs in the same formats, so simulated
// GPUs go through the same parsers.
//
// It is pure: no exec, no files, no clock, no goroutines, no logging; it
// imports the standard library and internal/core only. Running the
// commands, storing their evidence and acting on verdicts belong to the
// callers.
//
// # Parsers
//
//   - [ParseNvidiaSMIList]: nvidia-smi -L, "GPU N: MODEL (UUID: GPU-...)"
//     lines; indented MIG device lines are kept in the GPU's MIG list.
//   - [ParseTopo]: nvidia-smi topo -m. Tab-separated (or space-aligned)
//     matrix, header possibly ANSI-underlined, NIC columns and rows, the
//     affinity columns, the legend and the NIC legend ignored. Domains are
//     the connected components of NV# links, numbered from 0 by lowest GPU
//     index, a GPU without NVLink a domain of its own; without any NVLink
//     every GPU is in domain 0 (a flat node). This is the one rule for
//     core.GPU.Domain: internal/gpu's discovery uses this parser.
//   - [ParseDCGMDiscovery]: dcgmi discovery --list, "N GPUs found." or "N
//     GPUs found (Active).", then the GPU table; <<<NULL>>> values are
//     empty; the count must match the rows (a truncated output is refused).
//   - [ParseDCGMDiag]: dcgmi diag -r LEVEL -j, DCGM 4 ("DCGM Diagnostic",
//     per-entity results, metadata.version) and earlier ("DCGM GPU
//     Diagnostic", gpu_ids "0,1,2,3" expanded to one result per GPU, or
//     gpu_id; PASS/FAIL/WARN/SKIP), and the --iterations wrapper. Statuses
//     are normalised to Pass, Fail, Skip and Not Run; a Warn is a Fail, as
//     DCGM 4's JSON renders it. Warnings are strings or {"warning": ...}
//     objects. A result of entity group None, or a test with only a
//     test_summary, is for all GPUs (GPU -1); results for CPUs, switches
//     and other entities are left out. Text before the JSON is skipped.
//   - [ParseXidLine]: "NVRM: Xid (PCI:0000:c6:00): 79, pid=1234,
//     name=python, GPU has fallen off the bus." after any prefix (dmesg,
//     journal, /dev/kmsg); older drivers omit "PCI:". [ClassifyXid] maps a
//     code to fatal (Failed), warning (Suspect), application (an event on
//     the workload) or other (an event on the node).
//
// # Qualification rules
//
// [Qualify] checks, in order, and the first node-level failure gives the
// verdict's Reason and Message:
//
//  1. nvidia-smi -L: the command ran and parses (else CommandFailed); it
//     lists as many GPUs as the node advertises and every advertised index
//     (else GPUCountMismatch); each GPU's model matches, compared without
//     case, extra spaces or a leading "NVIDIA " (else GPUModelMismatch),
//     and its UUID, without case (else GPUUUIDMismatch). The mismatching
//     GPUs are Failed with that reason.
//  2. nvidia-smi topo -m: the command ran and parses (else CommandFailed);
//     it shows every advertised GPU, and the advertised Domain values
//     partition the GPUs exactly as the NVLink domains do, whatever their
//     labels (else TopologyMismatch). A topology without any NVLink
//     matches GPUs advertised all in one domain or each in its own (a
//     flat node), and no other grouping.
//  3. DCGM: when dcgmi is not available, the node fails with
//     DCGMNotAvailable if requireDCGM, else it passes with Reason
//     DCGMNotAvailable as a note, and nothing else is checked. Otherwise
//     dcgmi discovery ran and parses (else CommandFailed) and finds as
//     many GPUs as advertised (else GPUCountMismatch); its UUIDs map
//     DCGM's GPU IDs to indices (an ID it cannot map is taken as the
//     index). dcgmi diag's JSON must parse (else CommandFailed; DiagErr
//     matters only then, since dcgmi diag exits non-zero when a test
//     fails) and report no runtime_error (else CommandFailed). Each result
//     Fail marks its GPU Failed with Reason DiagnosticFailed and Message
//     "<test>: <warnings joined by "; ">" (the first failing test wins); a
//     failing result for all GPUs (GPU -1) fails every GPU. Skip and Not
//     Run are no failure. A per-GPU failure does not fail the node: its
//     other GPUs serve; the verdict passes with Reason DiagnosticFailed
//     naming the failed GPUs.
//
// Verdict.Pass is false only for a node-level failure: a count, model,
// UUID or topology mismatch, a command that failed or printed what cannot
// be read, or DCGM missing with requireDCGM. Verdict.GPUs lists every
// advertised GPU by index; a GPU no check named stays Healthy (a node that
// fails takes no work anyway). Qualify never returns Suspect: only a
// warning Xid makes a GPU Suspect.
//
// # Xid classes
//
// Fatal: 48, 64, 74, 79, 95, 119, 120, 140 (DCGM's health watch fails
// them; 64 from its memory watch). Warning: 32, 63, 94. Application: 13,
// 31, 43, 45, 68, 109, the codes NVIDIA's device plugin leaves to the
// application (DCGM's memory watch warns of 31 and 43, but the workload,
// not the GPU, caused them). Other: every other code.
//
// # Simulated outputs
//
// [SimNvidiaSMIList], [SimTopo] (NV18 within a Domain, SYS across,
// tab-separated with the affinity columns and legend), [SimDCGMDiscovery]
// (made-up PCI bus IDs) and [SimDCGMDiag] (DCGM 4 JSON, version 4.2.3,
// driver 570.124.06) print for a list of core.GPU what the real commands
// print, taking each GPU's Index as its DCGM GPU ID. SimDCGMDiag runs the
// tests of a level (1: the deployment tests; 2 adds memory and pcie; 3
// adds diagnostic, targeted_stress, targeted_power and memory_bandwidth;
// 4 adds memtest and pulse_test; below 1 counts as 1): all pass but those
// a SimFault names for a GPU, which fail with a warning. A fault on a test
// the level does not run changes nothing.
//
// The fixtures under testdata/ and where each comes from are listed in
// testdata/README.md.
package health
