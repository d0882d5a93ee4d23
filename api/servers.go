package api

import "time"

// Server is one gpufleet server sharing the store (GET /servers): every
// server answers the API; the leader, holder of the lease, runs the control
// loop.
type Server struct {
	Name string `json:"name"`
	// Addr is the address it listens on.
	Addr   string `json:"addr"`
	PID    int    `json:"pid"`
	Leader bool   `json:"leader"`
	// LeaseExpiresAt is when the leader's lease runs out unless renewed
	// (the leader only).
	LeaseExpiresAt *time.Time `json:"leaseExpiresAt,omitempty"`
	// LeaseToken is the lease's fencing token (the leader only): it
	// grows at every acquisition, and labels the pods the leader makes.
	LeaseToken int64     `json:"leaseToken,omitempty"`
	StartedAt  time.Time `json:"startedAt"`
	// LastSeen is when it last said it was there (every 2 s while it runs).
	LastSeen time.Time `json:"lastSeen"`
}

// Readiness is GET /readyz's answer: this server is ready (its store can be
// read and written), its name, and who leads.
type Readiness struct {
	Status string `json:"status"`
	Server string `json:"server"`
	// Leader is true when this server leads; LeaderName names the
	// holder of the lease (empty while none does).
	Leader         bool       `json:"leader"`
	LeaderName     string     `json:"leaderName,omitempty"`
	LeaseExpiresAt *time.Time `json:"leaseExpiresAt,omitempty"`
	LeaseToken     int64      `json:"leaseToken,omitempty"`
}
