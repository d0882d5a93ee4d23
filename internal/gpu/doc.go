// Package gpu finds the GPUs of this machine, or makes simulated ones from
// a spec such as "4xH100-80GB". Discovery runs nvidia-smi as argv, never
// through a shell: --query-gpu for the devices, and nvidia-smi topo -m for
// their NVLink domains, read by health's one topology parser
// (health.ParseTopo), so that discovery and qualification agree on every
// GPU, one without NVLink included.
//
// It imports core, config (the simulated GPUs' spec) and health.
package gpu
