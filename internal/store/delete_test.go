package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

// TestDeleteTeam: a team with active workloads is refused, naming them;
// once they are done, the team goes with its history, its service accounts
// and their tokens, and every person's membership in it.
func TestDeleteTeam(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if err := s.CreateTeam(ctx, core.NewTeam("b", t0)); err != nil {
		t.Fatal(err)
	}
	mk := func(u core.User, hash string) {
		t.Helper()
		u.CreatedAt = t0
		if err := s.CreateUser(ctx, u, core.Token{Name: "first", CreatedAt: t0}, hash); err != nil {
			t.Fatal(err)
		}
	}
	mk(core.User{Name: "alice", Memberships: []core.Membership{{Team: "a", Role: core.RoleMember}, {Team: "b", Role: core.RoleViewer}}}, "hash-alice")
	mk(core.User{Name: "a.ci", ServiceAccount: true, Memberships: []core.Membership{{Team: "a", Role: core.RoleMember}}}, "hash-a.ci")

	running := submit(t, s, 1000)
	if _, err := s.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: running.ID, Assignments: []core.Assignment{assign("n1", 0, 1000)}}}}, t0); err != nil {
		t.Fatal(err)
	}
	pending := submit(t, s, 1000)
	err := s.DeleteTeam(ctx, "a")
	if !errors.Is(err, core.ErrConflict) || !strings.Contains(err.Error(), string(running.ID)) || !strings.Contains(err.Error(), string(pending.ID)) {
		t.Fatalf("delete a team with active workloads: %v, want core.ErrConflict naming %s and %s", err, running.ID, pending.ID)
	}
	if _, err := s.Team(ctx, "a"); err != nil {
		t.Fatalf("the refused delete removed the team: %v", err)
	}

	if _, err := s.RequestStop(ctx, pending.ID, "Cancelled", "by test", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(ctx, running.ID, 1, core.Succeeded, "", "", nil, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTeam(ctx, "a"); err != nil {
		t.Fatalf("delete a team whose workloads are done: %v", err)
	}
	if _, err := s.Team(ctx, "a"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("team a after delete: %v, want not found", err)
	}
	if _, err := s.Workload(ctx, running.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("workload of the deleted team: %v, want not found", err)
	}
	if _, err := s.User(ctx, "a.ci"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("service account of the deleted team: %v, want not found", err)
	}
	if _, err := s.UserByTokenHash(ctx, "hash-a.ci", t0); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("token of the deleted team's service account: %v, want not found", err)
	}
	alice, err := s.User(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]core.Membership{{Team: "b", Role: core.RoleViewer}}, alice.Memberships); diff != "" {
		t.Errorf("alice's memberships after team a went (-want +got):\n%s", diff)
	}
	// A team made later under the name inherits nothing.
	if err := s.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	ws, err := s.Workloads(ctx, WorkloadFilter{Teams: []core.TeamName{"a"}})
	if err != nil || len(ws) != 0 {
		t.Errorf("the new team a holds %d workloads (%v), want none", len(ws), err)
	}
	if err := s.DeleteTeam(ctx, "nosuch"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("delete a missing team: %v, want not found", err)
	}
}

// TestDeleteUser: the user and its tokens go; a deleted user's token
// authenticates nobody, even one looked up a moment before (the cache).
func TestDeleteUser(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	u := core.User{Name: "bob", Memberships: []core.Membership{{Team: "a", Role: core.RoleMember}}, CreatedAt: t0}
	if err := s.CreateUser(ctx, u, core.Token{Name: "first", CreatedAt: t0}, "hash-bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UserByTokenHash(ctx, "hash-bob", t0); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUser(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UserByTokenHash(ctx, "hash-bob", t0); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("a deleted user's token: %v, want not found", err)
	}
	if ts, err := s.Tokens(ctx, "bob"); err != nil || len(ts) != 0 {
		t.Errorf("a deleted user's tokens: %v %v, want none", ts, err)
	}
	if err := s.DeleteUser(ctx, "bob"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("delete twice: %v, want not found", err)
	}
}
