package core

// Outputs is completed work a workload reported: accepted and rejected
// outputs in a unit of its choosing (images, tokens, jobs), and the network
// egress it reported. A workload reports them through the file named by
// $GPUFLEET_OUTPUTS_FILE (local executor) or the API; the store keeps their
// sums over all its attempts in its status.
type Outputs struct {
	Accepted    int64  `json:"accepted"`
	Rejected    int64  `json:"rejected"`
	Unit        string `json:"unit,omitempty"`
	EgressBytes int64  `json:"egressBytes,omitempty"`
}

// Add adds o2 to o: counts add up; a unit once set stays (a different
// one makes it "mixed").
func (o *Outputs) Add(o2 Outputs) {
	o.Accepted += o2.Accepted
	o.Rejected += o2.Rejected
	o.EgressBytes += o2.EgressBytes
	switch {
	case o2.Unit == "" || o.Unit == o2.Unit:
	case o.Unit == "":
		o.Unit = o2.Unit
	default:
		o.Unit = "mixed"
	}
}

// Labels of the workloads an acceptance card's stages run: the run's ID and
// the stage's name. Their outputs are the card's evidence, not the team's
// completed work, and the cost ledger counts them apart.
const (
	LabelAcceptanceRun   = "gpufleet.io/acceptance-run"
	LabelAcceptanceStage = "gpufleet.io/acceptance-stage"
)
