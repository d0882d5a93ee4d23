package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

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

// TokenHolders reads tokens and their users as another server sharing the
// store wrote them, past the cache of token lookups: revoked and expired
// tokens with their times, a changed role, and nothing for the token of a
// deleted user. AccessChanged is closed by each of this store's writes
// that changes access, and by nothing else.
func TestTokenHoldersAndAccessChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpufleet.db")
	s := open(t, path)
	ctx := context.Background()
	if err := s.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	member := []core.Membership{{Team: "a", Role: core.RoleMember}}
	for _, name := range []string{"ann", "bob"} {
		if err := s.CreateUser(ctx, core.User{Name: name, CreatedAt: t0, Memberships: member}, core.Token{ID: "tok-" + name, CreatedAt: t0}, "hash-"+name); err != nil {
			t.Fatal(err)
		}
	}
	expires := t0.Add(time.Hour)
	if err := s.CreateToken(ctx, core.Token{ID: "tok-ann2", User: "ann", CreatedAt: t0, ExpiresAt: &expires}, "hash-ann2"); err != nil {
		t.Fatal(err)
	}
	// Another server reads through its cache.
	other := s
	if backend == "postgres" {
		other = open(t, path)
	}
	if _, err := other.UserByTokenHash(ctx, "hash-ann", t0); err != nil {
		t.Fatal(err)
	}

	changes := []struct {
		what  string
		write func() error
	}{
		{"revoke a token", func() error { return s.RevokeToken(ctx, "tok-ann", t0.Add(time.Minute)) }},
		{"change a user", func() error {
			_, err := s.UpdateUser(ctx, "ann", func(u *core.User) error { u.SetRole("a", core.RoleViewer); return nil })
			return err
		}},
		{"delete a user", func() error { return s.DeleteUser(ctx, "bob") }},
		{"delete a team", func() error {
			if err := s.CreateTeam(ctx, core.NewTeam("b", t0)); err != nil {
				return err
			}
			return s.DeleteTeam(ctx, "b")
		}},
	}
	for _, c := range changes {
		ch := s.AccessChanged()
		if err := s.CreateToken(ctx, core.Token{ID: "tok-x-" + c.what, User: "ann", CreatedAt: t0}, "hash-x-"+c.what); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
			t.Errorf("a new token closed AccessChanged: nobody's access shrank")
		default:
		}
		if err := c.write(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		default:
			t.Errorf("%s: AccessChanged still open", c.what)
		}
	}

	got, err := other.TokenHolders(ctx, []string{"hash-ann", "hash-ann2", "hash-bob", "hash-nobody"})
	if err != nil {
		t.Fatal(err)
	}
	revoked := t0.Add(time.Minute)
	viewer := []core.Membership{{Team: "a", Role: core.RoleViewer}}
	ann := &core.User{Name: "ann", CreatedAt: t0, Memberships: viewer}
	want := map[string]TokenHolder{
		"hash-ann":  {Token: core.Token{ID: "tok-ann", User: "ann", CreatedAt: t0, RevokedAt: &revoked}, User: ann},
		"hash-ann2": {Token: core.Token{ID: "tok-ann2", User: "ann", CreatedAt: t0, ExpiresAt: &expires}, User: ann},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("token holders (-want +got):\n%s", diff)
	}
}
