// Package lead elects the one gpufleet server, of those sharing a store,
// that runs the control loop, the executors' starts and the monitors: the
// leader. The others serve the API and the portal.
//
// The lease is a row of the store (store.Campaign, Renew, Resign) with a
// fencing token that grows at every acquisition. TTL bounds a failover: each
// acquisition or renewal grants the row two thirds of TTL, renewed every
// quarter of TTL, so that a leader that dies leaves a lease that runs out
// within two thirds of TTL, and a live one survives a failed renewal. The
// elector campaigns every TTL/5 while it follows, and right when the
// holder's lease runs out by the database's clock; once it wins it runs the
// leader's work under a context that carries that term's token as the
// store's fence (store.WithFence), so that every write of that work is
// checked in its own transaction against the lease. It steps down, and
// cancels that work and waits for it, when a renewal is refused or when its
// own clock says the lease may have run out (the grant less a tenth for
// clock drift, counted from before the request that took or renewed it): a leader
// paused past its lease (SIGSTOP, a long GC, a frozen VM) finds on waking
// that Token is 0, so that neither its writes nor its pod starts go out
// even before the database refuses them. It then campaigns again, for a new
// token: the work it runs as leader is always that of one term.
//
// A SQLite store has one server (its data dir's lock), which leads from its
// start without an elector; Heartbeat still lists it.
//
// Why a lease in the database rather than a Kubernetes Lease object
// (client-go's leaderelection): the database is what the writes go to, so
// fencing them there closes the gap between "I think I lead" and "my write
// lands", which a lease elsewhere leaves open; and it works where gpufleet
// runs no Kubernetes at all.
//
// lead imports store; store does not know lead (Fence is store's).
package lead
