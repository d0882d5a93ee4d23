package core

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// NotebookPort is the port a notebook declares when it declares none
// (Jupyter's).
const NotebookPort = 8888

// FieldProblem is a refusal of one field of a submission, named as the API
// names it ("priority", "resources.gpus").
type FieldProblem struct {
	Field   string
	Problem string
	// Reason is the kind of refusal, a CamelCase word for events
	// (AdmitUnknownClass, AdmitBeyondGuarantee, AdmitInfeasible).
	Reason string
}

// Reasons of an admission's refusals.
const (
	AdmitUnknownClass    = "UnknownPriorityClass"
	AdmitBeyondGuarantee = "BeyondGuarantee"
	AdmitInfeasible      = "Infeasible"
)

// Refused is an admission's refusal: every problem it found, each naming
// its field. It wraps ErrInvalid.
type Refused struct{ Problems []FieldProblem }

func (r *Refused) Error() string {
	parts := make([]string, len(r.Problems))
	for i, p := range r.Problems {
		parts[i] = p.Field + ": " + p.Problem
	}
	return strings.Join(parts, "; ")
}

func (r *Refused) Unwrap() error { return ErrInvalid }

// Disallowed is a submission the team may not make (a priority class not
// granted to it), which a team-admin could allow. It wraps ErrForbidden.
type Disallowed struct{ Msg string }

func (d *Disallowed) Error() string { return d.Msg }

func (d *Disallowed) Unwrap() error { return ErrForbidden }

// Admission is what a submission is admitted against: its team, the
// server's priority classes (DefaultPriorityClasses when nil), and the
// nodes a request must fit one of (none: not checked, the scheduler
// explains).
type Admission struct {
	Team    *Team
	Classes []PriorityClass
	Nodes   []*Node
}

// Admit is the one admission step of every submission (a workload, a job
// array's tasks, an acceptance stage's workload), whichever edge it comes
// through: it gives w its defaults and refuses what may never run. Its
// fields were checked one by one at the edge; w.Team is the team of a.
//
// Defaults: kind job; the priority class of its kind (DefaultPriority); a
// name from its program's base name, or its image's; a notebook without
// ports serves NotebookPort; a workload without residency takes its
// team's.
//
// Refusals: a priority class the server does not know (Refused, naming
// priority); one the team may not use (a team-admin can
// grant it: Disallowed); a class that may not borrow asking for more GPUs than the
// team guarantees (Refused: it could never run); a request no node could
// hold, even empty (Refused, naming the field Feasible names).
func (a Admission) Admit(w *Workload) error {
	if w.Kind == "" {
		w.Kind = KindJob
	}
	if w.Priority == "" {
		w.Priority = DefaultPriority(w.Kind)
	}
	classes := a.Classes
	if classes == nil {
		classes = DefaultPriorityClasses()
	}
	cl, known := Class(classes, w.Priority)
	if !known {
		return &Refused{[]FieldProblem{{"priority", fmt.Sprintf("unknown priority class %q (known: %s)", w.Priority, strings.Join(classNames(classes), ", ")), AdmitUnknownClass}}}
	}
	t := a.Team
	if !t.AllowsClass(cl) {
		return &Disallowed{fmt.Sprintf("team %s may not use priority class %s (allowed: %s); a team-admin or an admin can grant it",
			t.Name, w.Priority, strings.Join(allowedClasses(t, classes), ", "))}
	}
	// A class that may not borrow runs only within the team's guarantee:
	// a request larger than the whole guarantee could never run.
	if ask := w.Request.TotalMilliGPU(); !cl.MayBorrow && w.Request.MilliGPU > 0 && ask > t.Guaranteed {
		return &Refused{[]FieldProblem{{"priority", fmt.Sprintf(
			"%s runs only within the team's guarantee, and team %s guarantees %s GPUs while this workload asks for %s; ask an admin to raise the guarantee or choose another class",
			w.Priority, t.Name, milliString(t.Guaranteed), milliString(ask)), AdmitBeyondGuarantee}}}
	}
	if w.Name == "" {
		w.Name = DefaultName(w.Command, w.Image)
	}
	if w.Kind == KindNotebook && len(w.Ports) == 0 {
		w.Ports = []Port{{Port: NotebookPort}}
	}
	if len(w.Request.Regions) == 0 {
		w.Request.Regions = slices.Clone(t.Residency)
	}
	if len(a.Nodes) > 0 {
		var e *Infeasible
		if err := Feasible(a.Nodes, w.Request); errors.As(err, &e) {
			return &Refused{[]FieldProblem{{e.Field, "can never run as asked: " + e.Problem, AdmitInfeasible}}}
		}
	}
	return nil
}

// DefaultName names a workload submitted without a name: after its
// program's base name, or its image's ("ghcr.io/acme/serve:2" → "serve")
// when only an image is given, as a valid name.
func DefaultName(command []string, image string) string {
	var name string
	if len(command) > 0 {
		name = command[0]
	} else {
		name, _, _ = strings.Cut(image, "@")
		if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
			name = name[:i]
		}
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	b := []byte(strings.ToLower(name))
	for i, c := range b {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			b[i] = '-'
		}
	}
	n := strings.Trim(string(b), "-")
	if len(n) > MaxNameLen {
		n = strings.Trim(n[:MaxNameLen], "-")
	}
	if n == "" {
		n = "workload"
	}
	return n
}

// MaxNameLen is the longest name a workload may have.
const MaxNameLen = 63

func classNames(classes []PriorityClass) []string {
	names := make([]string, len(classes))
	for i, p := range classes {
		names[i] = p.Name
	}
	return names
}

// allowedClasses lists the classes team t may use, most important first.
func allowedClasses(t *Team, classes []PriorityClass) []string {
	cs := slices.Clone(classes)
	slices.SortStableFunc(cs, func(a, b PriorityClass) int { return b.Value - a.Value })
	var out []string
	for _, p := range cs {
		if t.AllowsClass(p) {
			out = append(out, p.Name)
		}
	}
	if len(out) == 0 {
		out = []string{"none"}
	}
	return out
}

// milliString writes milli-GPUs as GPUs: 1500 → "1.5".
func milliString(m int64) string {
	s := fmt.Sprintf("%d.%03d", m/1000, m%1000)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}
