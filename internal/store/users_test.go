package store

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

// TestServiceAccountStaysInItsTeam: every write of a user goes through the
// rule that a service account belongs to one team for good, whoever asks.
func TestServiceAccountStaysInItsTeam(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if err := s.CreateTeam(ctx, core.NewTeam("b", t0)); err != nil {
		t.Fatal(err)
	}
	member := func(teams ...core.TeamName) []core.Membership {
		var ms []core.Membership
		for _, tm := range teams {
			ms = append(ms, core.Membership{Team: tm, Role: core.RoleMember})
		}
		return ms
	}
	create := func(u core.User) error {
		u.CreatedAt = t0
		return s.CreateUser(ctx, u, core.Token{Name: "first", CreatedAt: t0}, "hash-"+u.Name)
	}
	for _, u := range []core.User{
		{Name: "two", ServiceAccount: true, Memberships: member("a", "b")},
		{Name: "none", ServiceAccount: true},
		{Name: "b.ci", ServiceAccount: true, Memberships: member("a")},
	} {
		if err := create(u); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("create %s in %v: %v, want core.ErrInvalid", u.Name, u.Teams(), err)
		}
		if _, err := s.User(ctx, u.Name); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("%s was stored: %v", u.Name, err)
		}
	}
	if err := create(core.User{Name: "a.ci", ServiceAccount: true, Memberships: member("a")}); err != nil {
		t.Fatal(err)
	}
	for name, fn := range map[string]func(*core.User) error{
		"joins b":          func(u *core.User) error { u.SetRole("b", core.RoleViewer); return nil },
		"moves to b":       func(u *core.User) error { u.RemoveTeam("a"); u.SetRole("b", core.RoleMember); return nil },
		"leaves a":         func(u *core.User) error { u.RemoveTeam("a"); return nil },
		"becomes a person": func(u *core.User) error { u.ServiceAccount = false; return nil },
	} {
		if _, err := s.UpdateUser(ctx, "a.ci", fn); !errors.Is(err, core.ErrConflict) {
			t.Errorf("a.ci %s: %v, want core.ErrConflict", name, err)
		}
	}
	u, err := s.UpdateUser(ctx, "a.ci", func(u *core.User) error { u.SetRole("a", core.RoleViewer); return nil })
	if err != nil {
		t.Fatalf("a role change in its team: %v", err)
	}
	if diff := cmp.Diff([]core.Membership{{Team: "a", Role: core.RoleViewer}}, u.Memberships); diff != "" {
		t.Errorf("a.ci's memberships (-want +got):\n%s", diff)
	}
}
