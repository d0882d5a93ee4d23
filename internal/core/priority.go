package core

// PriorityClass is a named priority with the rules the scheduler applies to
// it. Higher Value is more important.
type PriorityClass struct {
	Name  string `json:"name"`
	Value int    `json:"value"`
	// Preemptible is false for classes that are never preempted.
	Preemptible bool `json:"preemptible"`
	// MayBorrow allows running over the team's guarantee on idle capacity.
	// A class that may not borrow is admitted only within quota.
	MayBorrow bool `json:"mayBorrow"`
	// IdleOnly classes run only on otherwise idle capacity: always counted
	// over quota, they never preempt anything.
	IdleOnly bool `json:"idleOnly,omitempty"`
}

// DefaultPriorityClasses are the classes every installation starts with,
// from most to least important:
//
//   - production: never preempted; admitted only within the team's quota.
//   - training: preempted only by production of its own team, or reclaimed
//     when running over quota.
//   - development (notebooks): preempted by training and production of its
//     own team, or reclaimed when over quota.
//   - batch: runs only on idle capacity, always over quota, preempted by
//     anything.
func DefaultPriorityClasses() []PriorityClass {
	return []PriorityClass{
		{Name: "production", Value: 1000, Preemptible: false, MayBorrow: false},
		{Name: "training", Value: 500, Preemptible: true, MayBorrow: true},
		{Name: "development", Value: 300, Preemptible: true, MayBorrow: true},
		{Name: "batch", Value: 100, Preemptible: true, MayBorrow: true, IdleOnly: true},
	}
}

// DefaultPriority is the class a workload of kind k gets when it names none:
// notebooks are interactive development, everything else is training.
func DefaultPriority(k Kind) string {
	if k == KindNotebook {
		return "development"
	}
	return "training"
}

// Class returns the named class from classes (DefaultPriorityClasses when
// nil), and whether it exists.
func Class(classes []PriorityClass, name string) (PriorityClass, bool) {
	if classes == nil {
		classes = DefaultPriorityClasses()
	}
	for _, c := range classes {
		if c.Name == name {
			return c, true
		}
	}
	return PriorityClass{}, false
}
