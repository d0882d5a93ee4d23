// Package cost is gpufleet's cost ledger: price versions × allocation
// intervals → what each workload, team, pool, user or label cost in a
// window, what the pools billed that nobody held (idle), FOCUS exports,
// budgets, estimates, and how amounts are shown to people (display.go).
//
// It is pure: an Input goes in (a window, the price versions, the pools'
// devices, the intervals and their workloads, the team volumes, and Now,
// the clock, passed in), reports come out. No I/O but the io.Writer of ExportFOCUS, no clock,
// no goroutines, no logging. It imports the standard library, api and core
// only (go-cmp and rapid in tests).
//
// # Billing
//
// An interval holds Milli/1000 of a device from Start to End (End zero:
// still held, billed up to min(To, Now)), clipped to the window [From, To)
// and split where the pool's price version changes (PriceAt: the version
// with the latest EffectiveFrom at or before the instant). A pool without a
// price in effect bills nothing there; its GPU hours still count.
//
//   - on-demand: Rate per GPU-hour for what is held. A BillingIncrement
//     rounds each interval's clipped duration up to a multiple of it (the
//     increment of the version in effect at the clipped end; the time it
//     adds is billed at that version's rate, in the period of the clipped
//     end). Clipping happens first, so an interval across two windows is
//     rounded in each.
//   - reserved: Rate per GPU-hour for what is held, and within the term
//     ([EffectiveFrom, EffectiveFrom+Term); a version with no EffectiveFrom
//     is committed for as long as it is in effect) the pool bills at each
//     instant Rate × max(GPUs, held GPUs): the committed GPUs nobody holds
//     are idle. After the term, held GPUs go on at the reserved rate until
//     the next version; a later version ends the earlier one, the rest of
//     a commitment included.
//   - monthly: Rate per GPU-month, i.e. Rate/730 per GPU-hour, for every
//     device of the pool (Input.Pools, today's count for the whole window)
//     all the time: what nobody holds is idle.
//   - owned: Purchase / Depreciation (in hours) + PerGPUHour per GPU-hour,
//     billed like monthly.
//
// GPUHourRate is the one conversion of a version's GPU price to a rate
// per GPU-hour (the four kinds above); the ledger, Estimate, the plan and
// the rates shown to people use it.
//
// A committed pool bills Rate × max(capacity, held); held beyond capacity
// (more held than devices, or than reserved GPUs) is billed to the
// workloads and nothing is idle then. The idle row (api.IdleRow) is what
// committed capacity bills while nobody holds it.
//
// Other lines, at the version in effect:
//   - host: HostMilliCPU/1000 × CPUCoreHour + HostMemoryMiB/1024 ×
//     MemoryGiBHour per hour of the interval (the held time, no increment);
//     the caller sets host resources on one interval per replica.
//   - licence: LicenceGPUHour per held GPU-hour, and LicencePerWorkload
//     [kind] once per workload, in the window holding the earliest start of
//     its first attempt (Attempt ≤ 1) among the input's intervals, at the
//     price of that interval's pool then.
//   - network: EgressBytes / 2^30 × EgressGiB of the workload's home pool
//     (the pool of its earliest interval in the input), at the instant it
//     is attributed to: FinishedAt, or Now while it is active.
//   - storage: StorageGiBMonth per GiB-month of each team volume
//     (Input.Volumes): SizeBytes / 2^30 × its months inside the window,
//     from Created to Deleted (zero: up to min(To, Now)), a month being
//     quantity.HoursPerMonth (730) hours as for monthly prices, so a GiB-month
//     is 2^30 bytes × 730 h and the price is an exact fraction per
//     byte-nanosecond. Volumes have no pool of their own: the caller puts
//     them in the server's default pool, whose version in effect bills
//     them, split at its version changes (no price: 0). A volume is a
//     cell of its own on its team's row of that pool, so a team with
//     volumes and no workloads has a row (by workload its row is
//     VolumeRow, "volume:TEAM/NAME"; by user or label, "(none)"). Its
//     outputs, GPU hours and retries are none. Checkpoints are not billed.
//
// # Outputs
//
// A workload's reports of completed work (Workload.Outputs) each count in
// the window that holds the time it was recorded: a running service's
// outputs count from the moment they are reported. A Succeeded job that
// never reported any counts one accepted output of unit "job" in the
// window where it finished (or, while active, one that reaches now: From ≤
// Now ≤ To); its retries (Attempts − 1) and network egress count there
// too. Outputs go to the row of the workload's home pool's cell. A unit
// left empty is "output". Accepted outputs of a workload that failed are
// unaccepted (shown, in no cost per accepted output); those of an
// acceptance card's stage (core.LabelAcceptanceRun) are the card's
// (acceptance), not the team's.
//
// A row keeps its outputs per unit (api.UnitOutputs). A unit's cost per
// accepted output is its own cost, the money of the workloads whose
// accepted outputs in the row are of that unit alone, plus a share of the
// rest of the row's total (failed, idle, stages, workloads of several
// units or none) in proportion to its own cost (equally between the
// units when none has any), over its accepted outputs, computed exactly
// and rounded half-up once; so Σ unit costs = the row's total. By pool, a
// workload's cost in pools other than its home's is shared in those rows.
// The total row is accumulated cell by cell, so it is the same whatever
// the dimension. The row's unit is its one unit of accepted or rejected
// outputs, "mixed" when several; costPerAcceptedOutput is TotalCost /
// accepted, rounded half-up to a micro-unit, when its accepted outputs are
// of one unit, null otherwise. failedGPUHours and preemptedGPUHours are
// the GPU hours of intervals with that Outcome, inside gpuHours (billed
// once, not added); idleGPUHours appear on the idle row and the total
// only; gpuHours are held hours (an increment adds cost, not hours).
//
// # Exact money and its one rounding
//
// Money is integer micro-units. Every price becomes an exact fraction of a
// micro-unit per unit of what it is billed on (milli-GPU nanoseconds,
// milli-CPU nanoseconds, MiB nanoseconds, byte nanoseconds of storage,
// bytes, workloads); the prices of
// a component (accelerator, host, storage, network, licence) are
// expressed over their least common denominator L, so that a cell's
// exact amount is an integer numerator N over L, accumulated in 128 bits
// (math/bits; past 128 bits, or for a multiplier beyond 64 bits, math/big
// takes over). Quantities are never rounded; GPU hours are float64 for
// display, converted from the exact sums.
//
// A report's cells are (workload, pool), each volume, and each pool's idle. For each
// component the exact total over all the cells (whoever may see them) is
// rounded half-up to a micro-unit once, and handed out by the
// largest-remainder method: each cell gets the floor of its exact amount
// and the micro-units left over go one each to the cells with the largest
// remainders (ties by workload ID, then pool; volumes after workloads,
// by team, name and creation). So Σ cells == the rounded
// total exactly, each cell is within a micro-unit of its exact amount, a
// row (a sum of cells) within one micro-unit per cell, TotalCost is the
// sum of the components, and every dimension (team, pool, workload, user,
// label) has the same total, which is Σ rows + idle == what the pools
// bill (rounded once). A member's rows are the same cells as an admin's.
//
// Amounts saturate at the largest Money (about 9.2 trillion units).
//
// A series rounds each step over its own cells (a step is a report of its
// own), so a row's steps may differ from its report total by a few
// micro-units. An export rounds as the report does over the whole window,
// then apportions each cell's amount, component by component and by the
// same method, over its rows (periods, commitment or not): Σ BilledCost is
// exactly the report's total.
//
// Budgets (Budget) are computed over the calendar month so far, which the
// caller builds as the Input's window; see Budget for the rules.
package cost
