package core

import (
	"slices"
	"time"
)

// User is a person or a service account. A user acts for the teams it
// belongs to; an admin acts for every team.
type User struct {
	Name      string     `json:"name"`
	Admin     bool       `json:"admin,omitempty"`
	Teams     []TeamName `json:"teams,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
}

// InTeam reports whether the user may act for team.
func (u *User) InTeam(team TeamName) bool {
	return u.Admin || slices.Contains(u.Teams, team)
}
