package core

import (
	"errors"
	"testing"
)

func TestServiceAccountsBelongToOneTeam(t *testing.T) {
	in := func(teams ...TeamName) []Membership {
		var ms []Membership
		for _, t := range teams {
			ms = append(ms, Membership{Team: t, Role: RoleMember})
		}
		return ms
	}
	t.Run("CheckNew", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			u    User
			ok   bool
		}{
			{"a person in two teams", User{Name: "alice", Memberships: in("a", "b")}, true},
			{"a person in no team", User{Name: "alice"}, true},
			{"a service account named after its one team", User{Name: "a.ci", ServiceAccount: true, Memberships: in("a")}, true},
			{"a service account an admin named otherwise", User{Name: "ci", ServiceAccount: true, Memberships: in("a")}, true},
			{"a service account in two teams", User{Name: "a.ci", ServiceAccount: true, Memberships: in("a", "b")}, false},
			{"a service account in no team", User{Name: "ci", ServiceAccount: true}, false},
			{"a service account named after another team", User{Name: "b.ci", ServiceAccount: true, Memberships: in("a")}, false},
			{"a person with a dot", User{Name: "a.alice", Memberships: in("a")}, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := tc.u.CheckNew()
				if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
					t.Errorf("CheckNew = %v, want ok %v (or ErrInvalid)", err, tc.ok)
				}
			})
		}
	})
	t.Run("CheckChange", func(t *testing.T) {
		sa := func(teams ...TeamName) *User {
			return &User{Name: "ci", ServiceAccount: true, Memberships: in(teams...)}
		}
		for _, tc := range []struct {
			name          string
			before, after *User
			ok            bool
		}{
			{"a role change in its team", sa("a"), &User{Name: "ci", ServiceAccount: true, Memberships: []Membership{{Team: "a", Role: RoleViewer}}}, true},
			{"joining a second team", sa("a"), sa("a", "b"), false},
			{"moving to another team", sa("a"), sa("b"), false},
			{"leaving its team", sa("a"), sa(), false},
			{"an old account leaving one of two teams", sa("a", "b"), sa("a"), true},
			{"an old account in no team given one", sa(), sa("a"), true},
			{"an old account in no team given two", sa(), sa("a", "b"), false},
			{"a person joins and leaves", &User{Name: "al", Memberships: in("a")}, &User{Name: "al", Memberships: in("b")}, true},
			{"a person becoming a service account", &User{Name: "ci", Memberships: in("a")}, sa("a"), false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := tc.after.CheckChange(tc.before)
				if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrConflict)) {
					t.Errorf("CheckChange = %v, want ok %v (or ErrConflict)", err, tc.ok)
				}
			})
		}
	})
}
