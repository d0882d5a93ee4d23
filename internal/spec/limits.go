package spec

// Limits on a workload spec. They bound what one request can make the
// platform store or run. A name is at most core.MaxNameLen characters.
const (
	MaxArgs        = 256
	MaxArgLen      = 16 << 10
	MaxEnv         = 128
	MaxEnvValueLen = 16 << 10
	MaxLabels      = 64
	MaxGPUsPerNode = 8
	MaxReplicas    = 256
	MaxImageLen    = 512
	// MaxPorts bounds the ports of one workload.
	MaxPorts = 8
	// MaxMounts bounds the volumes and mounts of one workload together (a
	// volume is at most quantity.MaxSizeBytes, 1 PiB).
	MaxMounts = 16
	// MaxEgressAllow bounds a network's allowed destinations.
	MaxEgressAllow = 64
)

// Bounds on the numbers of a workload and of a team's quota. Each is checked
// before the number becomes a duration, a byte count or a sum, so that no
// conversion overflows (maxRuntimeSeconds 9223372037 would wrap to a negative
// time.Duration, and 18446744074 to 290 ms).
const (
	// MaxRuntimeSeconds is the longest maxRuntimeSeconds: 365 days (0 is
	// no limit).
	MaxRuntimeSeconds = 365 * 24 * 3600
	// MaxGracePeriodSeconds is the longest gracePeriodSeconds: one hour.
	MaxGracePeriodSeconds = 3600
	// MaxGPUMemoryMiB is the largest share of one GPU by memory: 1 TiB.
	MaxGPUMemoryMiB = 1 << 20
	// MaxMilliCPU is the most host CPU one replica may ask for: 1024 CPUs.
	MaxMilliCPU = 1024 * 1000
	// MinMemoryMiB is the least host memory a workload may ask for (its
	// memory limit): less and no process starts.
	MinMemoryMiB = 16
	// MaxMemoryMiB is the most host memory one replica may ask for: 16 TiB.
	MaxMemoryMiB = 16 << 20
	// MaxQuotaMilliGPU bounds a team's guarantee, limit and each model
	// guarantee: a million GPUs.
	MaxQuotaMilliGPU = 1_000_000_000
	// MaxTeamWeight bounds a team's weight (at least 1).
	MaxTeamWeight = 1000
	// MaxModelGuarantees bounds how many models a team's guarantee names.
	MaxModelGuarantees = 64
	// MaxModelNameLen bounds the name of a GPU model in a model guarantee.
	MaxModelNameLen = 64
	// MaxPoolNameLen bounds the name of a pool in a pool guarantee (a label
	// value).
	MaxPoolNameLen = 63
)

// Bounds of secrets.
const (
	MaxSecretBytes = 1 << 20 // a secret's keys and values together
	MaxSecretKeys  = 64
	MaxSecretRefs  = 16
)
