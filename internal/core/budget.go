package core

// BudgetGate is what a team's monthly budget says to the control loop now.
type BudgetGate struct {
	// Alerting: spent reached the budget's alert level; Message says so.
	Alerting bool
	// Exceeded: a hard budget is spent; the team's pending work of
	// preemptible classes waits (Snapshot.BudgetExceeded) with Message.
	Exceeded bool
	// StopRunning: once exceeded, its running work of preemptible classes
	// is stopped too, lowest classes first.
	StopRunning bool
	Message     string
	// Month identifies the calendar month the gate is for (YYYY-MM), so
	// that an alert is raised once a month.
	Month string
}
