package qualify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/health"
)

// The commands of a qualification, as run (argv; no shell).
var (
	argvList      = []string{"nvidia-smi", "-L"}
	argvTopo      = []string{"nvidia-smi", "topo", "-m"}
	argvDiscovery = []string{"dcgmi", "discovery", "--list"}
)

func argvDiag(level int, gpus []int) []string {
	a := []string{"dcgmi", "diag", "-r", strconv.Itoa(level), "-j"}
	if len(gpus) > 0 {
		s := make([]string, len(gpus))
		for i, g := range gpus {
			s[i] = strconv.Itoa(g)
		}
		a = append(a, "-i", strings.Join(s, ","))
	}
	return a
}

// simulated reports whether every device of the node is simulated: its
// commands are then answered by health's simulator, in the real formats.
func simulated(n *core.Node) bool {
	return len(n.GPUs) > 0 && !slices.ContainsFunc(n.GPUs, func(g core.GPU) bool { return !g.Simulated })
}

func (q *Qualifier) qualify(ctx context.Context, n *core.Node, st core.NodeStatus, busy []*core.Workload, now time.Time) {
	req := st.Validate
	if req == nil {
		req = &core.ValidateRequest{Level: q.opts.Level, Reason: "registration", At: now}
	}
	whole := len(req.GPUs) == 0
	// 1. A node qualified as a whole takes no new work meanwhile.
	if whole && st.State != core.NodeValidating {
		q.update(ctx, n.Name, func(_ *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error) {
			st.After = core.NodeReady
			if st.State == core.NodeCordoned {
				st.After = core.NodeCordoned
			}
			return []core.NodeEvent{transition(st, core.NodeValidating, "Validating", fmt.Sprintf("qualification at level %d: %s", req.Level, req.Reason), req.By, now)}, nil
		})
		return
	}
	// 2. The work on the devices under test ends first.
	var onIt []*core.Workload
	for _, w := range busy {
		if holds(w, n.Name, req.GPUs) {
			onIt = append(onIt, w)
		}
	}
	if len(onIt) > 0 {
		if q.opts.Drain || req.Drain {
			q.stop(ctx, onIt, ReasonValidating, fmt.Sprintf("node %s is being qualified; requeued", n.Name))
		} else if whole && st.Reason != "WaitingForWork" {
			// Said once: what it waits for, for how long, and how to
			// give it up.
			msg := Waits(onIt, whole, false, n.Name, now)
			q.update(ctx, n.Name, func(_ *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error) {
				if st.State != core.NodeValidating {
					return nil, nil
				}
				st.Reason, st.Message = "WaitingForWork", msg
				return []core.NodeEvent{{Time: now, Reason: "WaitingForWork", Message: msg, GPU: -1}}, nil
			})
		}
		return
	}
	// 3. The commands, the evidence, the verdict.
	run := fmt.Sprintf("q-%d", now.UnixNano())
	ev, records := q.collect(ctx, n, st, req, run)
	var v health.Verdict
	if !simulated(n) && n.Name != q.opts.Local {
		v = health.Verdict{Pass: !q.opts.RequireDCGM, Reason: "NotAvailable",
			Message: "this server runs qualification commands on its own node only"}
		if q.opts.RequireDCGM {
			v.Reason = "DCGMNotAvailable"
		}
	} else if len(n.GPUs) == 0 {
		v = health.Verdict{Pass: true, Message: "no GPUs to qualify"}
	} else {
		v = health.Qualify(health.Advertised{GPUs: n.GPUs}, ev, q.opts.RequireDCGM)
	}
	judge(records, v)
	if err := q.opts.Store.AddEvidence(ctx, records); err != nil {
		q.log.Error("qualify: evidence", "node", n.Name, "err", err)
		return
	}
	_, diagErr := health.ParseDCGMDiag(ev.Diag)
	q.apply(ctx, n, req, v, ev.DCGMAvailable && diagErr == nil, now)
}

// collect runs (or simulates) the commands and returns what health reads
// and the evidence records.
func (q *Qualifier) collect(ctx context.Context, n *core.Node, st core.NodeStatus, req *core.ValidateRequest, run string) (health.Evidence, []core.Evidence) {
	var ev health.Evidence
	var records []core.Evidence
	sim := simulated(n)
	local := sim || n.Name == q.opts.Local
	timeout := q.opts.Timeout
	do := func(argv []string, long bool, simOut func() []byte) ([]byte, error) {
		rec := core.Evidence{Node: n.Name, Run: run, GPUs: req.GPUs, Argv: argv, StartedAt: q.opts.Now().UTC(), Simulated: sim}
		var out []byte
		var err error
		switch {
		case sim:
			out = simOut()
			zero := 0
			rec.Exit = &zero
		case !local:
			err = errors.New("not available: this server runs qualification commands on its own node only")
		default:
			t := timeout
			if t <= 0 {
				t = time.Minute
				if long {
					t = 30 * time.Minute
				}
			}
			r := q.opts.Runner.Run(ctx, argv, t)
			out, rec.Exit, rec.DurationMs = r.Stdout, r.Exit, r.Duration.Milliseconds()
			rec.Stderr = string(r.Stderr)
			switch {
			case r.Err != nil:
				err = r.Err
			case r.Exit != nil && *r.Exit != 0:
				err = fmt.Errorf("exit code %d", *r.Exit)
			}
		}
		rec.Stdout = string(out)
		if err != nil {
			rec.Err = err.Error()
		}
		records = append(records, rec)
		return out, err
	}
	var out []byte
	out, ev.ListErr = do(argvList, false, func() []byte { return []byte(health.SimNvidiaSMIList(n.GPUs)) })
	ev.List = string(out)
	out, ev.TopoErr = do(argvTopo, false, func() []byte { return []byte(health.SimTopo(n.GPUs)) })
	ev.Topo = string(out)
	records = append(records, q.cudaInit(ctx, n, req, run, &ev))
	out, ev.DiscoveryErr = do(argvDiscovery, false, func() []byte { return []byte(health.SimDCGMDiscovery(n.GPUs)) })
	ev.Discovery = string(out)
	ev.DCGMAvailable = !errors.Is(ev.DiscoveryErr, ErrNotFound) && local
	if ev.DCGMAvailable {
		tested := n.GPUs
		if len(req.GPUs) > 0 {
			tested = slices.DeleteFunc(slices.Clone(n.GPUs), func(g core.GPU) bool { return !slices.Contains(req.GPUs, g.Index) })
		}
		var faults []health.SimFault
		for _, f := range st.Faults {
			faults = append(faults, health.SimFault{GPU: f.GPU, Diag: f.Test})
		}
		ev.Diag, ev.DiagErr = do(argvDiag(req.Level, req.GPUs), true, func() []byte { return health.SimDCGMDiag(tested, req.Level, faults) })
	} else {
		records = append(records, core.Evidence{Node: n.Name, Run: run, GPUs: req.GPUs, Argv: argvDiag(req.Level, req.GPUs),
			StartedAt: q.opts.Now().UTC(), Simulated: sim, Err: "not run: dcgmi is not available"})
	}
	if d, err := health.ParseDCGMDiag(ev.Diag); err == nil {
		for i := range records {
			records[i].DCGMVersion, records[i].DriverVersion = d.Version, d.Driver
		}
	}
	return ev, records
}

// cudaInit runs the CUDA probe in the workloads' sandbox, where the node
// is this machine's and has real GPUs, and returns its evidence; ev gets
// what it printed, or why it was skipped.
func (q *Qualifier) cudaInit(ctx context.Context, n *core.Node, req *core.ValidateRequest, run string, ev *health.Evidence) core.Evidence {
	rec := core.Evidence{Node: n.Name, Run: run, Check: core.EvidenceCUDAInit, GPUs: req.GPUs, StartedAt: q.opts.Now().UTC(), Simulated: simulated(n)}
	argv, why := cudaProbeArgv(q.opts.CUDAProbe)
	rec.Argv = []string{CUDAProbeName} // what runs, once it does
	switch {
	case simulated(n):
		why = "skipped: the node's GPUs are simulated, no NVIDIA GPU to initialise"
	case len(n.GPUs) == 0:
		why = "skipped: no NVIDIA GPU on this node"
	case n.Name != q.opts.Local:
		why = "not available: this server runs qualification commands on its own node only"
	case q.opts.Sandbox == nil:
		why = "not available: this server runs no workloads of its own to probe the sandbox of"
	}
	if why != "" {
		rec.Err = why
		return rec
	}
	gpus := make([]int, len(n.GPUs))
	for i, g := range n.GPUs {
		gpus[i] = g.Index
	}
	t := q.opts.Timeout
	if t <= 0 {
		t = time.Minute
	}
	rec.Argv = argv
	r := q.opts.Sandbox.RunAsTask(ctx, core.EvidenceCUDAInit, argv, gpus, t)
	rec.Exit, rec.DurationMs, rec.Stdout, rec.Stderr = r.Exit, r.Duration.Milliseconds(), string(r.Stdout), string(r.Stderr)
	ev.CUDARan, ev.CUDA = true, string(r.Stdout)
	switch {
	case r.Err != nil:
		ev.CUDAErr, rec.Err = r.Err, r.Err.Error()
	case r.Exit != nil && *r.Exit != 0:
		ev.CUDAErr = fmt.Errorf("exit code %d", *r.Exit)
	}
	return rec
}

// judge writes each record's result from the verdict.
func judge(records []core.Evidence, v health.Verdict) {
	for i := range records {
		r := &records[i]
		cmd := strings.Join(r.Argv[:min(2, len(r.Argv))], " ")
		r.Result = core.EvidencePass
		if r.Check == core.EvidenceCUDAInit {
			judgeCUDA(r, v)
			continue
		}
		switch {
		case strings.HasPrefix(r.Err, "not ") && (r.Argv[0] == "dcgmi" || v.Reason == "NotAvailable"):
			r.Result, r.Message = core.EvidenceNotAvailable, r.Err
		case r.Err != "":
			r.Result, r.Message = core.EvidenceFail, r.Err
		case cmd == "nvidia-smi -L" && slices.Contains([]string{"GPUCountMismatch", "GPUModelMismatch", "GPUUUIDMismatch"}, v.Reason):
			r.Result, r.Message = core.EvidenceFail, v.Message
		case cmd == "nvidia-smi topo" && v.Reason == "TopologyMismatch":
			r.Result, r.Message = core.EvidenceFail, v.Message
		case cmd == "dcgmi diag":
			for _, g := range v.GPUs {
				if g.Health == core.GPUFailed {
					r.Result = core.EvidenceFail
					r.Message = strings.TrimPrefix(r.Message+fmt.Sprintf("; GPU %d: %s", g.Index, g.Reason+": "+g.Message), "; ")
				}
			}
		}
	}
}

// apply records the verdict: each device tested is Healthy or Failed, and
// the node returns to service or is Failed.
func (q *Qualifier) apply(ctx context.Context, n *core.Node, req *core.ValidateRequest, v health.Verdict, diagRan bool, now time.Time) {
	q.update(ctx, n.Name, func(n *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error) {
		var evs []core.NodeEvent
		st.Validate = nil
		if st.GPUs == nil {
			st.GPUs = map[int]core.GPUStatus{}
		}
		failed := map[int]health.GPUVerdict{}
		for _, g := range v.GPUs {
			if g.Health == core.GPUFailed {
				failed[g.Index] = g
			}
		}
		for _, g := range n.GPUs {
			if len(req.GPUs) > 0 && !slices.Contains(req.GPUs, g.Index) {
				continue
			}
			old := st.GPUs[g.Index]
			if f, bad := failed[g.Index]; bad {
				st.GPUs[g.Index] = core.GPUStatus{Health: core.GPUFailed, Reason: f.Reason, Message: f.Message, Since: now}
				evs = append(evs, core.NodeEvent{Time: now, Type: core.EventWarning, Reason: f.Reason, Message: fmt.Sprintf("GPU %d failed qualification: %s", g.Index, f.Message), GPU: g.Index})
				continue
			}
			if old.Health != "" && old.Health != core.GPUHealthy {
				if !diagRan {
					// Nothing tested it: it stays out of service until a
					// diagnostic passes, or an admin's qualification does.
					evs = append(evs, core.NodeEvent{Time: now, Type: core.EventWarning, Reason: "NotQualifiable",
						Message: fmt.Sprintf("GPU %d stays %s (%s): no diagnostic could run on it (dcgmi not available here)", g.Index, old.Health, old.Reason), GPU: g.Index})
					continue
				}
				evs = append(evs, core.NodeEvent{Time: now, Reason: "Qualified", Message: fmt.Sprintf("GPU %d passed qualification at level %d; it takes work again", g.Index, req.Level), GPU: g.Index})
			}
			delete(st.GPUs, g.Index)
		}
		st.Faults = slices.DeleteFunc(st.Faults, func(f core.DiagFault) bool { return len(req.GPUs) == 0 || slices.Contains(req.GPUs, f.GPU) })
		switch {
		case !v.Pass:
			evs = append(evs, transition(st, core.NodeFailed, v.Reason, v.Message, "", now))
		case len(req.GPUs) == 0:
			to := st.After
			if to == "" {
				to = core.NodeReady
			}
			st.After = ""
			t := now
			st.LastQualified = &t
			msg := fmt.Sprintf("passed qualification at level %d", req.Level)
			if v.Message != "" {
				msg += " (" + v.Message + ")"
			}
			if len(failed) > 0 {
				msg += fmt.Sprintf("; %d GPU(s) failed and take no work", len(failed))
			}
			evs = append(evs, transition(st, to, "Qualified", msg, "", now))
		}
		return evs, nil
	})
}

// judgeCUDA writes the CUDA probe's result: not available when it was
// skipped, failed with the verdict's message when CUDA did not start,
// else what CUDA saw.
func judgeCUDA(r *core.Evidence, v health.Verdict) {
	switch {
	case strings.HasPrefix(r.Err, "skipped") || strings.HasPrefix(r.Err, "not "):
		r.Result, r.Message = core.EvidenceNotAvailable, r.Err
	case v.Reason == health.ReasonCUDAInitFailed:
		r.Result, r.Message = core.EvidenceFail, v.Message
	default:
		r.Result = core.EvidencePass
		if p, err := health.ParseCUDAProbe(r.Stdout); err == nil {
			r.Message = fmt.Sprintf("CUDA %d.%d starts in the workloads' sandbox and sees %d GPU(s): %s",
				p.DriverVersion/1000, p.DriverVersion%1000/10, p.DeviceCount, strings.Join(p.Devices, ", "))
		}
	}
}
