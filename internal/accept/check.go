package accept

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/plan"
	"github.com/gpufleet/gpufleet/internal/spec"
)

// Bounds on an acceptance card.
const (
	MaxStages               = 32
	MaxStageCount           = 16 // workloads one stage submits
	MaxCriteria             = 64 // per stage
	MaxDisruptAfterSeconds  = 3600
	DefaultDisruptAfterSecs = 10
	MaxDecisionNoteLen      = 4096
	MaxDecisions            = 100 // decisions one run keeps
	MaxBriefFileLen         = 4096
)

// StageWorkloads is how many workloads a stage submits (Count, or 1).
func StageWorkloads(s api.Stage) int {
	if s.Count <= 0 {
		return 1
	}
	return s.Count
}

// StageDisruptAfter is how long a failure stage's workload runs before
// gpufleet disrupts it.
func StageDisruptAfter(s api.Stage) time.Duration {
	if s.DisruptAfterSeconds <= 0 {
		return DefaultDisruptAfterSecs * time.Second
	}
	return time.Duration(s.DisruptAfterSeconds) * time.Second
}

// CheckCard checks a card and returns every problem, each naming its field
// ("stages[1].criteria[0]"). It needs no server state: whether the team
// and the target pool exist is the server's check.
func CheckCard(c *api.AcceptanceCard) []api.FieldError {
	var errs api.FieldErrors
	add := errs.Add
	if c.Kind != "" && c.Kind != api.KindAcceptanceCard {
		add("kind", "must be %s, not %q", api.KindAcceptanceCard, c.Kind)
	}
	if !core.ValidName(c.Name) {
		add("name", "must be lowercase letters, digits and '-', starting and ending with a letter or digit, at most %d characters", core.MaxNameLen)
	}
	if c.Team != "" && !core.ValidName(c.Team) {
		add("team", "is not a valid team name")
	}
	if c.Brief != nil {
		if c.BriefFile != "" {
			add("briefFile", "give either brief or briefFile, not both")
		}
		for _, fe := range plan.CheckBrief(c.Brief) {
			switch {
			case fe.Field == "model" && c.Brief.Model.Name == "" && c.Brief.Model.Parameters == 0:
			case fe.Field == "contextLength" && c.Brief.ContextLength == 0:
			default:
				add("brief."+fe.Field, "%s", fe.Problem)
			}
		}
	}
	if len(c.BriefFile) > MaxBriefFileLen || strings.IndexByte(c.BriefFile, 0) >= 0 {
		add("briefFile", "must be a path of at most %d bytes without NUL", MaxBriefFileLen)
	}
	if p := c.Target.Pool; p != "" && (len(p) > 63 || strings.ContainsAny(p, " \t\r\n/\\\"'")) {
		add("target.pool", "%q is not a pool's name", p)
	}
	if m := c.Target.GPUModel; m != "" && (strings.TrimSpace(m) == "" || len(m) > 64) {
		add("target.gpuModel", "must be a model name of at most 64 characters")
	}
	switch {
	case len(c.Stages) == 0:
		add("stages", "must list at least one stage")
	case len(c.Stages) > MaxStages:
		add("stages", "at most %d stages", MaxStages)
	}
	seen := map[string]int{}
	runs := 0
	for i, s := range c.Stages {
		at := fmt.Sprintf("stages[%d]", i)
		if !core.ValidName(s.Name) {
			add(at+".name", "must be lowercase letters, digits and '-', at most %d characters", core.MaxNameLen)
		} else if j, dup := seen[s.Name]; dup {
			add(at+".name", "%q is also the name of stages[%d]", s.Name, j)
		} else {
			seen[s.Name] = i
		}
		known := false
		for _, t := range api.StageTypes {
			known = known || s.Type == t
		}
		if !known {
			add(at+".type", "unknown stage type %q: want one of %s", s.Type, strings.Join(api.StageTypes, ", "))
		}
		if s.Type == api.StageReview {
			if s.Workload != nil {
				add(at+".workload", "a review stage runs nothing: it compares the recorded results with the brief's targets")
			}
			if s.Count != 0 {
				add(at+".count", "a review stage runs nothing")
			}
			if i != len(c.Stages)-1 {
				add(at+".type", "a review stage must be the last stage")
			}
		} else if known {
			runs++
			if s.Workload == nil {
				add(at+".workload", "a %s stage needs the workload it runs", s.Type)
			}
		}
		if s.Workload != nil {
			for _, fe := range spec.CheckWorkload(s.Workload) {
				add(at+".workload."+fe.Field, "%s", fe.Problem)
			}
		}
		if s.Count < 0 || s.Count > MaxStageCount {
			add(at+".count", "must be from 1 to %d (0 means 1)", MaxStageCount)
		}
		if s.Type == api.StageFailure {
			switch s.Disrupt {
			case "":
				add(at+".disrupt", "a failure stage needs a disruption: one of %s", strings.Join(api.Disruptions, ", "))
			case api.DisruptRequeue, api.DisruptStop, api.DisruptDrain:
			default:
				add(at+".disrupt", "unknown disruption %q: want one of %s", s.Disrupt, strings.Join(api.Disruptions, ", "))
			}
			if s.DisruptAfterSeconds < 0 || s.DisruptAfterSeconds > MaxDisruptAfterSeconds {
				add(at+".disruptAfterSeconds", "must be from 1 to %d (0 means %d)", MaxDisruptAfterSeconds, DefaultDisruptAfterSecs)
			}
		} else {
			if s.Disrupt != "" {
				add(at+".disrupt", "only a failure stage disrupts its workload")
			}
			if s.DisruptAfterSeconds != 0 {
				add(at+".disruptAfterSeconds", "only a failure stage disrupts its workload")
			}
		}
		if s.Load != nil {
			if s.Type != api.StageLoad {
				add(at+".load", "only a load stage has a load generator")
			} else {
				errs = append(errs, checkLoad(at+".load", s.Load, s.Workload)...)
			}
		}
		if len(s.Criteria) > MaxCriteria {
			add(at+".criteria", "at most %d criteria", MaxCriteria)
		}
		for j, e := range s.Criteria {
			if _, err := ParseCriterion(e); err != nil {
				add(fmt.Sprintf("%s.criteria[%d]", at, j), "%v", err)
			}
		}
	}
	if len(c.Stages) > 0 && runs == 0 {
		add("stages", "must have a stage that runs something (smoke, functional, load or failure)")
	}
	return errs
}

// Commits reports whether a decision commits capacity (extend, reserve,
// dedicate, scale): every decision but reject.
func Commits(d *api.Decision) bool { return d.Decision != api.DecisionReject }

// CheckDecision checks a decision as submitted.
func CheckDecision(d *api.Decision) []api.FieldError {
	var errs api.FieldErrors
	known := false
	for _, k := range api.Decisions {
		known = known || d.Decision == k
	}
	if !known {
		errs.Add("decision", "unknown decision %q: want one of %s", d.Decision, strings.Join(api.Decisions, ", "))
	}
	if len(d.Note) > MaxDecisionNoteLen || strings.IndexByte(d.Note, 0) >= 0 {
		errs.Add("note", "at most %d bytes, without NUL", MaxDecisionNoteLen)
	} else if d.Override && strings.TrimSpace(d.Note) == "" {
		errs.Add("note", "an override needs a note saying why the run's result is overridden")
	}
	if d.By != "" {
		errs.Add("by", "is set by the server")
	}
	if !d.At.IsZero() {
		errs.Add("at", "is set by the server")
	}
	return errs
}
