package core

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAdmit: the one admission step's defaults and refusals.
func TestAdmit(t *testing.T) {
	team := &Team{Name: "research", Guaranteed: 2000, Residency: []string{"eu-west"}, PriorityClasses: []string{"training", "production"}}
	nodes := []*Node{{Name: "n1", Region: "eu-west", GPUs: []GPU{{Index: 0, Model: "H100", MemoryMiB: 81920}, {Index: 1, Model: "H100", MemoryMiB: 81920}}}}
	adm := Admission{Team: team, Nodes: nodes}
	base := func() *Workload {
		return &Workload{Spec: Spec{Team: "research", Command: []string{"/usr/bin/python3", "train.py"}, Request: Request{MilliGPU: 1000}}}
	}
	t.Run("defaults", func(t *testing.T) {
		w := base()
		if err := adm.Admit(w); err != nil {
			t.Fatal(err)
		}
		got := []any{w.Kind, w.Priority, w.Name, w.Request.Regions, len(w.Ports)}
		want := []any{KindJob, "training", "python3", []string{"eu-west"}, 0}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("(-want +got)\n%s", d)
		}
		nb := base()
		nb.Kind, nb.Priority, nb.Command, nb.Image = KindNotebook, "training", nil, "ghcr.io/acme/lab:2"
		if err := adm.Admit(nb); err != nil {
			t.Fatal(err)
		}
		if nb.Name != "lab" || len(nb.Ports) != 1 || nb.Ports[0].Port != NotebookPort {
			t.Errorf("notebook: name %q, ports %v; want lab and %d", nb.Name, nb.Ports, NotebookPort)
		}
	})
	for _, tc := range []struct {
		name  string
		edit  func(*Workload)
		field string // "" for a Disallowed
	}{
		{"an unknown class", func(w *Workload) { w.Priority = "urgent" }, "priority"},
		{"a class the team may not use", func(w *Workload) { w.Priority = "development" }, ""},
		{"a no-borrow class over the guarantee", func(w *Workload) { w.Priority, w.Request.MilliGPU, w.Request.Replicas = "production", 1000, 3 }, "priority"},
		{"a request no node can hold", func(w *Workload) { w.Request.MilliGPU = 4000 }, "resources.gpus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := base()
			tc.edit(w)
			err := adm.Admit(w)
			var r *Refused
			var d *Disallowed
			switch {
			case tc.field == "" && (!errors.As(err, &d) || !errors.Is(err, ErrForbidden)):
				t.Errorf("Admit: %v, want a Disallowed wrapping ErrForbidden", err)
			case tc.field != "" && (!errors.As(err, &r) || r.Problems[0].Field != tc.field || !errors.Is(err, ErrInvalid)):
				t.Errorf("Admit: %v, want a refusal naming %s", err, tc.field)
			}
		})
	}
}
