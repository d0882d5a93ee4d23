package config

import "fmt"

// Limits bound what one caller or one team may ask of the server, so that a
// careless or hostile client cannot take the platform down.
type Limits struct {
	// MaxPendingPerTeam and MaxPendingPerUser bound the pending workloads
	// of one team and of one submitter (0: no bound). The per-user bound
	// does not apply to admins; the per-team bound applies to everyone.
	MaxPendingPerTeam int `json:"maxPendingPerTeam"`
	MaxPendingPerUser int `json:"maxPendingPerUser"`
	// RequestsPerSecond and Burst shape each token's request rate (a token
	// bucket; requests without a valid token share one bucket per client
	// address). RequestsPerSecond 0 turns the limit off. Admins are not
	// limited.
	RequestsPerSecond float64 `json:"requestsPerSecond"`
	Burst             int     `json:"burst"`
}

// DefaultLimits are the limits of a server configured with none.
func DefaultLimits() Limits {
	return Limits{MaxPendingPerTeam: 10000, MaxPendingPerUser: 1000, RequestsPerSecond: 20, Burst: 200}
}

// fileLimits is the limits section of a configuration file: each field
// left out keeps its default.
type fileLimits struct {
	MaxPendingPerTeam *int     `json:"maxPendingPerTeam"`
	MaxPendingPerUser *int     `json:"maxPendingPerUser"`
	RequestsPerSecond *float64 `json:"requestsPerSecond"`
	Burst             *int     `json:"burst"`
}

func (l Limits) validate() []error {
	var errs []error
	if l.MaxPendingPerTeam < 0 {
		errs = append(errs, fmt.Errorf("limits.maxPendingPerTeam %d: must be 0 (no bound) or more", l.MaxPendingPerTeam))
	}
	if l.MaxPendingPerUser < 0 {
		errs = append(errs, fmt.Errorf("limits.maxPendingPerUser %d: must be 0 (no bound) or more", l.MaxPendingPerUser))
	}
	if !(l.RequestsPerSecond >= 0 && l.RequestsPerSecond <= 1e6) { // NaN too
		errs = append(errs, fmt.Errorf("limits.requestsPerSecond %g: must be from 0 (no limit) to 1000000", l.RequestsPerSecond))
	}
	if l.RequestsPerSecond > 0 && (l.Burst < 1 || l.Burst > 1e6) {
		errs = append(errs, fmt.Errorf("limits.burst %d: must be from 1 to 1000000 while requestsPerSecond is set", l.Burst))
	}
	return errs
}
