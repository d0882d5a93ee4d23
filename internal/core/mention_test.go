package core

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	ours := map[WorkloadID]bool{"wl-ours00000001": true, "wl-ours00000001-7": true}
	visible := func(id WorkloadID) bool { return ours[id] }
	theirs := &Workload{ID: "wl-theirs000001", Spec: Spec{Team: "pa", Priority: "training"}}
	own := &Workload{ID: "wl-ours00000001", Spec: Spec{Team: "pb", Priority: "production"}}
	for _, tc := range []struct{ name, msg, want string }{
		{"a mention of another team's workload goes whole",
			"reclaimed by " + Mention(theirs) + ": team pb runs over its quota, and the preempting team reclaims its guarantee",
			"reclaimed by a workload of another team: team pb runs over its quota, and the preempting team reclaims its guarantee"},
		{"a mention of a visible workload stays",
			"preempted by " + Mention(own) + ": a production workload of its own team needs the capacity",
			"preempted by wl-ours00000001 (team pb, production): a production workload of its own team needs the capacity"},
		{"a bare ID goes too", "reclaimed by wl-theirs000001", "reclaimed by a workload of another team"},
		{"an ID that is no workload goes, as another team's would", "waiting for wl-zzzzzzzzzzzz.", "waiting for a workload of another team."},
		{"several, each on its own", "wl-ours00000001 and wl-theirs000001 (team pa, batch) and wl-x",
			"wl-ours00000001 and a workload of another team and a workload of another team"},
		{"a word that merely ends in wl- is not an ID", "owl-1 and bowl-2 stay", "owl-1 and bowl-2 stay"},
		{"no ID", "placed on gpu1 (gpu 0)", "placed on gpu1 (gpu 0)"},
		{"another team's array task goes whole, index included", "waiting for wl-theirs000001-7 to end", "waiting for a workload of another team to end"},
		{"a visible array task, or a visible workload's pod, stays", "wl-ours00000001-7 and pod wl-ours00000001-2", "wl-ours00000001-7 and pod wl-ours00000001-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Redact(tc.msg, visible); got != tc.want {
				t.Errorf("Redact(%q)\n got %q\nwant %q", tc.msg, got, tc.want)
			}
		})
	}
}

func TestMentionWords(t *testing.T) {
	// Redact finds mentions by this form (mentionRE).
	w := &Workload{ID: "wl-7kq2m9x4c1ab", Spec: Spec{Team: "research", Priority: "training"}}
	if got, want := Mention(w), "wl-7kq2m9x4c1ab (team research, training)"; got != want {
		t.Errorf("Mention = %q, want %q", got, want)
	}
	if got := Redact("preempted by "+Mention(w), func(WorkloadID) bool { return false }); strings.Contains(got, "research") || !strings.Contains(got, ForeignWorkload) {
		t.Errorf("Redact of a mention the reader may not see: %q", got)
	}
}
