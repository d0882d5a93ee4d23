package core

// PriorityClass is a named priority. Higher Value is more important.
type PriorityClass struct {
	Name  string `json:"name"`
	Value int    `json:"value"`
	// Preemptible is false for classes that are never preempted.
	Preemptible bool `json:"preemptible"`
}

// DefaultPriorityClasses are the classes every installation starts with,
// from most to least important.
func DefaultPriorityClasses() []PriorityClass {
	return []PriorityClass{
		{Name: "production", Value: 1000, Preemptible: false},
		{Name: "training", Value: 500, Preemptible: true},
		{Name: "development", Value: 300, Preemptible: true},
		{Name: "batch", Value: 100, Preemptible: true},
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
