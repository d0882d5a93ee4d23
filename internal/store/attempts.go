package store

import (
	"context"
	"math"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// attemptsTable holds each attempt's end, written in the transaction that
// records it (Finish, Requeue): its span, how it ended, its request of the
// host (all replicas) and what it used, CPU time in microseconds and peak
// memory in bytes (0: not measured). The same in both dialects.
const attemptsTable = `CREATE TABLE attempts (
		workload_id TEXT NOT NULL,
		attempt BIGINT NOT NULL,
		team TEXT NOT NULL,
		started_at BIGINT NOT NULL,
		ended_at BIGINT NOT NULL,
		phase TEXT NOT NULL,
		reason TEXT NOT NULL,
		milli_cpu BIGINT NOT NULL,
		memory_mib BIGINT NOT NULL,
		cpu_usec BIGINT NOT NULL,
		peak_memory_bytes BIGINT NOT NULL,
		PRIMARY KEY (workload_id, attempt)
	)`

// attemptsIndex serves AttemptsBetween.
const attemptsIndex = `CREATE INDEX attempts_end ON attempts(ended_at)`

// recordAttempt writes the end of w's current attempt at end: w is the
// workload as it ran (its start, request and attempt number), read in tx
// before its status changes.
func recordAttempt(tx *wtx, w *core.Workload, phase core.Phase, reason string, used core.HostUse, end time.Time) error {
	start := end
	if w.Status.StartedAt != nil && w.Status.StartedAt.Before(end) {
		start = *w.Status.StartedAt
	}
	n := int64(w.Request.Count())
	_, err := tx.Exec(`INSERT INTO attempts (workload_id, attempt, team, started_at, ended_at, phase, reason, milli_cpu, memory_mib, cpu_usec, peak_memory_bytes)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, string(w.ID), w.Status.Attempts, string(w.Team), unixNano(start), unixNano(end), string(phase), reason,
		w.Request.MilliCPU*n, w.Request.MemoryMiB*n, int64(used.CPU/time.Microsecond), max(0, used.PeakMemoryBytes))
	return err
}

const selectAttempts = `SELECT workload_id, attempt, team, started_at, ended_at, phase, reason, milli_cpu, memory_mib, cpu_usec, peak_memory_bytes FROM attempts`

// Attempts lists a workload's attempts that ended, oldest first (none for
// one that does not exist, or whose attempts ended before attempts were
// recorded).
func (s *Store) Attempts(ctx context.Context, id core.WorkloadID) ([]core.Attempt, error) {
	return s.queryAttempts(ctx, selectAttempts+" WHERE workload_id = ? ORDER BY attempt", string(id))
}

// AttemptsBetween lists the attempts that ended and ran in [from, to), by
// workload and attempt.
func (s *Store) AttemptsBetween(ctx context.Context, from, to time.Time) ([]core.Attempt, error) {
	return s.queryAttempts(ctx, selectAttempts+" WHERE ended_at > ? AND started_at < ? ORDER BY workload_id, attempt", unixNano(from), unixNano(to))
}

func (s *Store) queryAttempts(ctx context.Context, q string, args ...any) ([]core.Attempt, error) {
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.Attempt
	for rows.Next() {
		var a core.Attempt
		var id, team, phase string
		var start, end, cpu int64
		if err := rows.Scan(&id, &a.Number, &team, &start, &end, &phase, &a.Reason, &a.MilliCPU, &a.MemoryMiB, &cpu, &a.Used.PeakMemoryBytes); err != nil {
			return nil, err
		}
		a.Workload, a.Team, a.Phase = core.WorkloadID(id), core.TeamName(team), core.Phase(phase)
		a.Start, a.End = fromNano(start), fromNano(end)
		a.Used.CPU = time.Duration(min(cpu, math.MaxInt64/1000)) * time.Microsecond
		out = append(out, a)
	}
	return out, rows.Err()
}
