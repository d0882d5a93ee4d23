package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Several servers may run on one host (the test suites start many at
// once): each draws its tasks' user IDs, its network range, bridge and
// nftables table from what every server on the host shares. A slot is one
// server's share: the slot-th block of slotUIDs user IDs of the teams'
// range, the slot-th /24 of the network range, the bridge and the table
// named after the slot. A server holds its slot with an exclusive flock on
// ClaimDir/<slot>.lock for as long as it runs (Close, or its exit, lets
// go); the lock file names the data directory that holds it, so that the
// same data directory takes the same slot again (its teams' files are
// owned by its user IDs) and no other takes a slot while tasks of its
// holder still run (supervisors outlive their server).

// ClaimDir is where the servers of this host record their slots.
var ClaimDir = "/run/gpufleet/claims"

// slotUIDs is the number of user IDs in a slot.
const slotUIDs = 256

// claim is a slot held by this executor.
type claim struct {
	slot int
	h    *held
	// prior is the data directory that held the slot before, when its
	// server ended without releasing it: what it left (a bridge, rules,
	// cgroups) is this server's to clean.
	prior string
}

// held is a slot this process holds: its locked file, for the data
// directory root, by refs executors (a server restarted in the same
// process, as tests do, shares its slot).
type held struct {
	f    *os.File
	root string
	refs int
	// net is the slot's workload network, one for all the executors of
	// this process that hold the slot (their views must not diverge).
	net *netManager
}

var (
	heldMu sync.Mutex
	holds  = map[int]*held{}
)

// claimRecord is the content of a slot's lock file and of the data
// directory's slot file (DataDir/slot.json).
type claimRecord struct {
	Slot    int    `json:"slot"`
	DataDir string `json:"dataDir"`
	PID     int    `json:"pid"`
}

// claimSlot takes a slot for the data directory root among n: the one its
// slot file names (refusing to run when another live server, or the
// tasks of another data directory, hold it), else the first free one.
// usable says whether a slot may be taken (its network range must not be
// the host's).
func claimSlot(root string, n, prefer int, usable func(slot int) error) (*claim, error) {
	if err := os.MkdirAll(ClaimDir, 0o755); err != nil {
		return nil, fmt.Errorf("claim a slot of user IDs and addresses: %w", err)
	}
	mine := filepath.Join(root, "slot.json")
	rec := claimRecord{Slot: -1}
	err := readJSON(mine, &rec)
	if errors.Is(err, fs.ErrNotExist) && prefer >= 0 {
		rec.Slot, err = prefer, nil
	}
	if err == nil && rec.Slot >= 0 && rec.Slot < n {
		c, holder, err := tryClaim(rec.Slot, root, true)
		if err != nil {
			return nil, err
		}
		if c == nil {
			return nil, fmt.Errorf("this data directory's slot %d (its teams' user IDs) is held by %s: stop that server, or give this one another local.uidRange", rec.Slot, holder)
		}
		if err := writeJSON(mine, claimRecord{Slot: rec.Slot, DataDir: root}); err != nil {
			c.release()
			return nil, err
		}
		return c, nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", mine, err)
	}
	// A slot no other data directory still names first; then one whose
	// data directory runs no task (a server that ended and has not come
	// back).
	var last error
	for _, evict := range []bool{false, true} {
		for slot := range n {
			if err := usable(slot); err != nil {
				last = err
				continue
			}
			c, _, err := tryClaim(slot, root, evict)
			if err != nil {
				return nil, err
			}
			if c == nil {
				continue
			}
			if err := writeJSON(mine, claimRecord{Slot: slot, DataDir: root}); err != nil {
				c.release()
				return nil, err
			}
			return c, nil
		}
	}
	if last != nil {
		return nil, fmt.Errorf("no free slot of user IDs and addresses among %d: %w", n, last)
	}
	return nil, fmt.Errorf("no free slot of user IDs and addresses: the %d slots of this host are held by other servers (%s)", n, ClaimDir)
}

// tryClaim takes slot for root if no other server holds it and no task of
// another data directory that held it still runs, and, unless evict, that
// data directory no longer names the slot (it is gone: a test's, say); it
// returns nil and who holds it otherwise. A server killed and started again
// so finds its slot, and its teams' user IDs, still its own.
func tryClaim(slot int, root string, evict bool) (*claim, string, error) {
	heldMu.Lock()
	defer heldMu.Unlock()
	if h, ok := holds[slot]; ok {
		if h.root != root {
			return nil, "another server of this process (" + h.root + ")", nil
		}
		h.refs++
		return &claim{slot: slot, h: h}, "", nil
	}
	path := filepath.Join(ClaimDir, strconv.Itoa(slot)+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, "", fmt.Errorf("claim slot %d: %w", slot, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		var held claimRecord
		readJSON(path, &held)
		f.Close()
		return nil, fmt.Sprintf("the server of %s (pid %d)", held.DataDir, held.PID), nil
	}
	var prev claimRecord
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
		json.Unmarshal(b, &prev)
	}
	c := &claim{slot: slot, h: &held{f: f, root: root, refs: 1}}
	if prev.DataDir != "" && prev.DataDir != root {
		if liveTasksOf(prev.DataDir) {
			f.Close()
			return nil, "the tasks of " + prev.DataDir + ", still running", nil
		}
		var theirs claimRecord
		if !evict && readJSON(filepath.Join(prev.DataDir, "slot.json"), &theirs) == nil && theirs.Slot == slot {
			f.Close()
			return nil, "the data directory " + prev.DataDir + ", whose server may start again", nil
		}
		c.prior = prev.DataDir
	}
	b, _ := json.Marshal(claimRecord{Slot: slot, DataDir: root, PID: os.Getpid()})
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, "", err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return nil, "", err
	}
	holds[slot] = c.h
	return c, "", nil
}

// release lets the slot go once no executor of this process holds it,
// and reports whether it did; the lock file keeps naming this data
// directory, so that its tasks, if any still run, keep the slot from
// others.
func (c *claim) release() bool { return c.releaseAfter(nil) }

// releaseAfter is release, running last (when it lets the slot go) while
// it still holds it, so that no other server of the slot can have begun
// to use what last removes.
func (c *claim) releaseAfter(last func()) bool {
	if c == nil || c.h == nil {
		return false
	}
	heldMu.Lock()
	defer heldMu.Unlock()
	h := c.h
	c.h = nil
	if h.refs--; h.refs > 0 {
		return false
	}
	if last != nil {
		last()
	}
	delete(holds, c.slot)
	h.f.Close()
	return true
}

// liveTasksOf reports whether a supervisor of a task of the data
// directory root runs: "gpufleet-shim <root>/workloads/..." in its command
// line.
func liveTasksOf(root string) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	marker := filepath.Join(root, "workloads") + "/"
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 2 && args[1] == shimArg && strings.HasPrefix(args[2], marker) {
			return true
		}
	}
	return false
}

// slotRange is the block of user IDs of slot within first-last.
func slotRange(first, last, slot int) (int, int) {
	lo := first + slot*slotUIDs
	return lo, min(last, lo+slotUIDs-1)
}

// uidSlots is the number of slots the user ID range holds.
func uidSlots(first, last int) int { return max(1, (last-first+1)/slotUIDs) }

// preferredSlot is the slot that holds the user IDs a data directory gave
// its teams before it recorded a slot (a server before slots: IDs from the
// start of the range), or -1 when it gave none; an error when they span
// several slots.
func preferredSlot(uidsFile string, first int) (int, error) {
	var f uidFile
	if err := readJSON(uidsFile, &f); err != nil || len(f.Teams) == 0 {
		return -1, nil
	}
	slot := -1
	for team, uid := range f.Teams {
		s := (uid - first) / slotUIDs
		if uid < first || (slot >= 0 && s != slot) {
			return -1, fmt.Errorf("the teams' user IDs in %s (team %s: %d) do not fall in one slot of %d IDs from %d: give this server the local.uidRange it had", uidsFile, team, uid, slotUIDs, first)
		}
		slot = s
	}
	return slot, nil
}

// sharedNet is the slot's workload network another executor of this
// process made, if any.
func (c *claim) sharedNet() *netManager {
	heldMu.Lock()
	defer heldMu.Unlock()
	return c.h.net
}

func (c *claim) setNet(nm *netManager) {
	heldMu.Lock()
	defer heldMu.Unlock()
	c.h.net = nm
}
