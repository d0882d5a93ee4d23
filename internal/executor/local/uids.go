package local

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"

	"github.com/gpufleet/gpufleet/internal/core"
)

// teamIDs gives each team a user ID of its own from a range, the lowest
// free one the first time the team runs a task, and keeps the mapping in a
// file so that it stays the same across restarts (the files a team's
// tasks left in their directories are owned by it).
type teamIDs struct {
	path        string
	first, last int

	mu   sync.Mutex
	uids map[core.TeamName]int
}

// uidFile is what the file holds.
type uidFile struct {
	Teams map[core.TeamName]int `json:"teams"`
}

func loadTeamIDs(path string, first, last int) (*teamIDs, error) {
	ids := &teamIDs{path: path, first: first, last: last, uids: map[core.TeamName]int{}}
	var f uidFile
	if err := readJSON(path, &f); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("team user IDs: %w", err)
	}
	for team, uid := range f.Teams {
		if uid < first || uid > last {
			return nil, fmt.Errorf("team user IDs: %s has %d, outside this server's %d-%d", team, uid, first, last)
		}
		ids.uids[team] = uid
	}
	return ids, nil
}

// uid returns the team's user ID, allocating and recording one the first
// time.
func (t *teamIDs) uid(team core.TeamName) (int, error) {
	if team == "" {
		team = "default"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if uid, ok := t.uids[team]; ok {
		return uid, nil
	}
	used := make([]int, 0, len(t.uids))
	for _, uid := range t.uids {
		used = append(used, uid)
	}
	slices.Sort(used)
	next := t.first
	for _, u := range used {
		if u == next {
			next++
		}
	}
	if next > t.last {
		return 0, fmt.Errorf("no user ID left for team %s: the range %d-%d is used up", team, t.first, t.last)
	}
	t.uids[team] = next
	if err := writeJSON(t.path, uidFile{Teams: t.uids}); err != nil {
		delete(t.uids, team)
		return 0, fmt.Errorf("record the user ID of team %s: %w", team, err)
	}
	return next, nil
}
