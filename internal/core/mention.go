package core

import (
	"regexp"
	"strings"
)

// ForeignWorkload is how a message shown to a team names a workload of a
// team the reader cannot see.
const ForeignWorkload = "a workload of another team"

// Mention names workload w inside a message about another workload: its ID,
// team and class, "wl-4pzi4zb2m4pxh5ys (team research, training)". A message
// names another workload only through a mention (and names that
// workload's team nowhere else), so that Redact can take out, for a reader
// who may not see that team, the whole reference and nothing more.
// (Joined, not formatted: the scheduler writes one for every victim.)
func Mention(w *Workload) string {
	return string(w.ID) + " (team " + string(w.Team) + ", " + w.Priority + ")"
}

// mentionRE finds workload IDs ("wl-" and lowercase letters and digits,
// and an array task's "-INDEX"),
// each with the rest of its mention when it has one. The character before
// an ID is checked by Redact (no look-behind in Go's regexp).
var mentionRE = regexp.MustCompile(`wl-[a-z0-9]+(?:-[0-9]+)?( \(team [a-z0-9-]+, [a-z0-9-]+\))?`)

// Redact rewrites msg for one reader: every workload ID in it that visible
// refuses (another team's, or none at all) becomes ForeignWorkload, with
// the team and class of its mention. IDs that visible accepts are left as
// they are. An ID is found by its form alone, wherever the message came
// from, so a reference written without Mention is taken out too.
func Redact(msg string, visible func(WorkloadID) bool) string {
	if !strings.Contains(msg, "wl-") {
		return msg
	}
	var b strings.Builder
	last := 0
	for _, m := range mentionRE.FindAllStringSubmatchIndex(msg, -1) {
		start, end := m[0], m[1]
		if start > 0 && isIDChar(msg[start-1]) {
			continue // part of a longer word ("owl-1")
		}
		id := msg[start:end]
		if m[2] >= 0 {
			id = msg[start:m[2]]
		}
		// "wl-x-7" is task 7 of array wl-x, or attempt 7's pod of
		// workload wl-x: visible when either is.
		if visible(WorkloadID(id)) {
			continue
		}
		if i := strings.LastIndexByte(id, '-'); i > len("wl") && visible(WorkloadID(id[:i])) {
			continue
		}
		b.WriteString(msg[last:start])
		b.WriteString(ForeignWorkload)
		last = end
	}
	if last == 0 {
		return msg
	}
	b.WriteString(msg[last:])
	return b.String()
}

func isIDChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c >= 'A' && c <= 'Z'
}
