package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// ErrStorageLimit wraps core.ErrInvalid: a volume would take its team over
// its storage limit.
var ErrStorageLimit = fmt.Errorf("over the team's storage limit: %w", core.ErrInvalid)

// CreateVolume stores a new team volume. limit is the team's storage limit
// in bytes (-1: none): the sizes of its volumes, this one included, must
// stay within it (checked in the same transaction, so two creates cannot
// both pass), or the error wraps ErrStorageLimit. A volume of the same name
// is core.ErrConflict, a team that does not exist core.ErrNotFound.
func (s *Store) CreateVolume(ctx context.Context, v core.Volume, limit int64) error {
	return s.do(ctx, func(tx *wtx) error {
		var n int
		if err := tx.QueryRow("SELECT count(*) FROM teams WHERE name = ?", string(v.Team)).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("team %s: %w", v.Team, core.ErrNotFound)
		}
		var used int64
		if err := tx.QueryRow("SELECT count(*), coalesce(sum(size_bytes), 0) FROM volumes WHERE team = ? AND name = ? AND deleted_at = 0", string(v.Team), v.Name).Scan(&n, &used); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("team %s has a volume %s already: %w", v.Team, v.Name, core.ErrConflict)
		}
		if err := tx.QueryRow("SELECT coalesce(sum(size_bytes), 0) FROM volumes WHERE team = ? AND deleted_at = 0", string(v.Team)).Scan(&used); err != nil {
			return err
		}
		if limit >= 0 && used+v.SizeBytes > limit {
			return fmt.Errorf("team %s holds %d bytes of volumes, and %d more would pass its limit of %d bytes: %w",
				v.Team, used, v.SizeBytes, limit, ErrStorageLimit)
		}
		setAuditObject(ctx, v.Name, string(v.Team))
		_, err := tx.Exec("INSERT INTO volumes (team, name, size_bytes, used_bytes, created_at, measured_at) VALUES (?, ?, ?, -1, ?, 0)",
			string(v.Team), v.Name, v.SizeBytes, unixNano(v.CreatedAt))
		return err
	})
}

const volumeColumns = "team, name, size_bytes, used_bytes, created_at, measured_at, deleted_at"

func scanVolume(sc interface{ Scan(...any) error }) (core.Volume, error) {
	var v core.Volume
	var team string
	var created, measured, deleted int64
	if err := sc.Scan(&team, &v.Name, &v.SizeBytes, &v.UsedBytes, &created, &measured, &deleted); err != nil {
		return v, err
	}
	v.Team, v.CreatedAt = core.TeamName(team), fromNano(created)
	if measured != 0 {
		v.MeasuredAt = fromNano(measured)
	}
	if deleted != 0 {
		v.DeletedAt = fromNano(deleted)
	}
	return v, nil
}

func scanVolumes(rows *sql.Rows, err error) ([]core.Volume, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.Volume
	for rows.Next() {
		v, err := scanVolume(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// VolumeHistory lists every volume that existed during [from, to), deleted
// ones included (DeletedAt set), by creation: what the cost ledger bills.
func (s *Store) VolumeHistory(ctx context.Context, from, to time.Time) ([]core.Volume, error) {
	return scanVolumes(s.read.QueryContext(ctx, "SELECT "+volumeColumns+" FROM volumes WHERE created_at < ? AND (deleted_at = 0 OR deleted_at > ?) ORDER BY created_at, id",
		unixNano(to), unixNano(from)))
}

// Volumes lists volumes by team and name: one team's, or every team's when
// team is "".
func (s *Store) Volumes(ctx context.Context, team core.TeamName) ([]core.Volume, error) {
	q, args := "SELECT "+volumeColumns+" FROM volumes WHERE deleted_at = 0 ORDER BY team, name", []any{}
	if team != "" {
		q, args = "SELECT "+volumeColumns+" FROM volumes WHERE team = ? AND deleted_at = 0 ORDER BY name", []any{string(team)}
	}
	return scanVolumes(s.read.QueryContext(ctx, q, args...))
}

// Volume returns one volume, or core.ErrNotFound.
func (s *Store) Volume(ctx context.Context, team core.TeamName, name string) (core.Volume, error) {
	v, err := scanVolume(s.read.QueryRowContext(ctx, "SELECT "+volumeColumns+" FROM volumes WHERE team = ? AND name = ? AND deleted_at = 0", string(team), name))
	if errors.Is(err, sql.ErrNoRows) {
		return v, fmt.Errorf("volume %s/%s: %w", team, name, core.ErrNotFound)
	}
	return v, err
}

// SetVolumeUsage records a measure of what a volume holds; a volume
// deleted meanwhile is left alone.
func (s *Store) SetVolumeUsage(ctx context.Context, team core.TeamName, name string, used int64, at time.Time) error {
	return s.do(ctx, func(tx *wtx) error {
		_, err := tx.Exec("UPDATE volumes SET used_bytes = ?, measured_at = ? WHERE team = ? AND name = ? AND deleted_at = 0", used, unixNano(at), string(team), name)
		return err
	})
}

// VolumeUsers lists, sorted, the committed Pending and Running workloads
// that mount a team's volume. (A submit that commits in the same batch as
// a delete is not seen: it fails at start, its volume gone.)
func (s *Store) VolumeUsers(team core.TeamName, name string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for _, w := range s.active {
		if w.Team != team {
			continue
		}
		for _, m := range w.Volumes {
			if m.Name == name {
				out = append(out, string(w.ID))
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// DeleteVolume marks a volume deleted at now (its row stays for the cost
// ledger, VolumeHistory) and its data to be purged (VolumePurges), or is
// core.ErrNotFound. A volume
// that a workload not yet ended mounts is core.ErrConflict, naming it:
// cancel it first. (The executor removes the data when the control loop
// next reconciles volumes.)
func (s *Store) DeleteVolume(ctx context.Context, team core.TeamName, name string, now time.Time) error {
	return s.do(ctx, func(tx *wtx) error {
		var n int
		if err := tx.QueryRow("SELECT count(*) FROM volumes WHERE team = ? AND name = ? AND deleted_at = 0", string(team), name).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("volume %s/%s: %w", team, name, core.ErrNotFound)
		}
		if users := s.VolumeUsers(team, name); len(users) > 0 {
			return fmt.Errorf("volume %s/%s is mounted by %s, not ended (cancel first): %w", team, name, strings.Join(users, ", "), core.ErrConflict)
		}
		setAuditObject(ctx, name, string(team))
		if _, err := tx.Exec("UPDATE volumes SET deleted_at = ? WHERE team = ? AND name = ? AND deleted_at = 0", unixNano(now), string(team), name); err != nil {
			return err
		}
		_, err := tx.Exec("INSERT INTO volume_purges (team, name, at) VALUES (?, ?, ?) ON CONFLICT (team, name) DO UPDATE SET at = excluded.at", string(team), name, unixNano(now))
		return err
	})
}

// VolumePurge names a deleted volume whose data the executor has still to
// remove.
type VolumePurge struct {
	Team core.TeamName
	Name string
}

// VolumePurges lists the deleted volumes whose data is still to be removed.
func (s *Store) VolumePurges(ctx context.Context) ([]VolumePurge, error) {
	rows, err := s.read.QueryContext(ctx, "SELECT team, name FROM volume_purges ORDER BY at, team, name")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []VolumePurge
	for rows.Next() {
		var p VolumePurge
		var team string
		if err := rows.Scan(&team, &p.Name); err != nil {
			return nil, err
		}
		p.Team = core.TeamName(team)
		out = append(out, p)
	}
	return out, rows.Err()
}

// PurgePending reports whether a deleted volume of that name still has
// data to remove.
func (s *Store) PurgePending(ctx context.Context, team core.TeamName, name string) (bool, error) {
	var n int
	err := s.read.QueryRowContext(ctx, "SELECT count(*) FROM volume_purges WHERE team = ? AND name = ?", string(team), name).Scan(&n)
	return n > 0, err
}

// PurgeDone records that a deleted volume's data is gone.
func (s *Store) PurgeDone(ctx context.Context, team core.TeamName, name string) error {
	return s.do(ctx, func(tx *wtx) error {
		_, err := tx.Exec("DELETE FROM volume_purges WHERE team = ? AND name = ?", string(team), name)
		return err
	})
}
