package core

import "fmt"

// SubmitWarnings lists what a submission should be told though it is
// accepted: a notebook in a preemptible class (development, its default,
// above all) is stopped and requeued whenever higher-priority work of its
// team needs the GPUs, losing what it held in memory.
func SubmitWarnings(k Kind, class PriorityClass) []string {
	if k == KindNotebook && class.Preemptible {
		return []string{fmt.Sprintf("a notebook in priority class %s can be preempted (by its team's higher-priority work, or reclaimed when its team is over quota), losing its kernel's state; for a long-lived notebook ask a team-admin to grant production (never preempted, runs within the team's guarantee) and submit with --priority production", class.Name)}
	}
	return nil
}
