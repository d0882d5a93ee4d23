package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Trace is a cluster and the work submitted to it: gpufleet's own trace
// format, read and written as JSON lines (docs/TRACE-FORMAT.md).
type Trace struct {
	// Source says where the trace came from (free text).
	Source string
	Nodes  []core.Node
	// Teams are the teams the trace describes with their quotas; tasks may
	// name other teams too.
	Teams []Team
	Tasks []Task
}

// Team is a team with its quota, in milli-GPU.
type Team struct {
	Name       string
	Guaranteed int64
	Limit      int64 // core.Unlimited (-1) for none
	Weight     int64 // at least 1
}

// Task is one unit of work: when it was submitted, what it asked for and how
// long it ran once started.
type Task struct {
	Name string
	// Team is "" when the trace does not say.
	Team string
	// Submitted is the time from the start of the trace.
	Submitted time.Duration
	// Runtime is how long the task ran once started; UnknownRuntime when
	// the source never ran it (a pod that stayed pending until deleted).
	Runtime time.Duration
	Request core.Request
	// Priority is a priority class name; "" leaves the choice to the
	// replay.
	Priority string
}

// UnknownRuntime is the Runtime of a task that never ran in its source.
const UnknownRuntime time.Duration = -1

// GPUTask reports whether the task asks for GPUs (a count, a fraction or
// GPU memory). gpufleet places only such tasks.
func (t Task) GPUTask() bool { return t.Request.MilliGPU > 0 || t.Request.GPUMemoryMiB > 0 }

// FromPods turns the pods of an openb pod list into tasks, keeping every
// pod. A pod's runtime is deletion − scheduled; a pod that never ran (phase
// Pending, or times out of order) gets UnknownRuntime. CPU-only pods stay,
// with no GPU request: callers decide what to do with them.
func FromPods(pods []Pod) []Task {
	out := make([]Task, 0, len(pods))
	for _, p := range pods {
		t := Task{Name: p.Name, Submitted: time.Duration(p.Creation) * time.Second, Runtime: UnknownRuntime, Request: p.Request}
		if p.Phase != "Pending" && p.Deletion > 0 && p.Scheduled >= p.Creation && p.Deletion >= p.Scheduled {
			t.Runtime = time.Duration(p.Deletion-p.Scheduled) * time.Second
		}
		out = append(out, t)
	}
	return out
}

// Format and Version name the JSONL format in its header line.
const (
	Format  = "gpufleet-trace"
	Version = 1
)

// Lines of the format. Numbers that may hold fractions (GPUs, seconds) are
// kept raw so that they are read exactly, as decimals (see decimal).
type (
	headerLine struct {
		Kind    string `json:"kind"`
		Format  string `json:"format"`
		Version int    `json:"version"`
		Source  string `json:"source,omitempty"`
	}
	nodeLine struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
		// Either GPUs, one entry per device, or GPUCount devices of one
		// model.
		GPUs         []gpuLine         `json:"gpus,omitempty"`
		GPUCount     int               `json:"gpuCount,omitempty"`
		GPUModel     string            `json:"gpuModel,omitempty"`
		GPUMemoryMiB int64             `json:"gpuMemoryMiB,omitempty"`
		MilliCPU     int64             `json:"milliCPU,omitempty"`
		MemoryMiB    int64             `json:"memoryMiB,omitempty"`
		Pool         string            `json:"pool,omitempty"`
		Region       string            `json:"region,omitempty"`
		Labels       map[string]string `json:"labels,omitempty"`
	}
	gpuLine struct {
		Model     string `json:"model"`
		MemoryMiB int64  `json:"memoryMiB,omitempty"`
		Domain    int    `json:"domain,omitempty"`
	}
	teamLine struct {
		Kind           string          `json:"kind"`
		Name           string          `json:"name"`
		GuaranteedGPUs json.RawMessage `json:"guaranteedGPUs,omitempty"`
		LimitGPUs      json.RawMessage `json:"limitGPUs,omitempty"`
		Weight         int64           `json:"weight,omitempty"`
	}
	taskLine struct {
		Kind           string          `json:"kind"`
		Name           string          `json:"name,omitempty"`
		Team           string          `json:"team,omitempty"`
		Submitted      json.RawMessage `json:"submitted"`
		RuntimeSeconds json.RawMessage `json:"runtimeSeconds,omitempty"`
		GPUs           json.RawMessage `json:"gpus"`
		GPUMemoryMiB   int64           `json:"gpuMemoryMiB,omitempty"`
		GPUModels      []string        `json:"gpuModels,omitempty"`
		MilliCPU       int64           `json:"milliCPU,omitempty"`
		MemoryMiB      int64           `json:"memoryMiB,omitempty"`
		Priority       string          `json:"priority,omitempty"`
		Replicas       int             `json:"replicas,omitempty"`
	}
)

// Limits of the format.
const (
	maxLine         = 1 << 20
	maxGPUsPerTask  = 64
	maxGPUsPerNode  = 64
	maxTaskReplicas = 10000
)

// ReadJSONL reads a trace in gpufleet's JSONL format. Decoding is strict: an
// unknown kind or field, a value of the wrong type or out of range, or a
// header that is not the first line, fails with an error naming the line
// and the field.
func ReadJSONL(r io.Reader) (Trace, error) {
	var t Trace
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLine)
	nodes := map[string]bool{}
	teams := map[string]bool{}
	sawData := false
	line := 0
	for sc.Scan() {
		line++
		if b := bytes.TrimSpace(sc.Bytes()); len(b) > 0 {
			if err := t.readLine(b, &sawData, nodes, teams); err != nil {
				return Trace{}, fmt.Errorf("line %d: %w", line, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Trace{}, fmt.Errorf("line %d: longer than %d bytes", line+1, maxLine)
		}
		return Trace{}, fmt.Errorf("line %d: %w", line+1, err)
	}
	return t, nil
}

func (t *Trace) readLine(b []byte, sawData *bool, nodes, teams map[string]bool) error {
	var k struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(b, &k); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	switch k.Kind {
	case "header":
		var h headerLine
		if err := decodeStrict(b, &h); err != nil {
			return err
		}
		switch {
		case *sawData:
			return errors.New("header: must be the first line")
		case h.Format != Format:
			return fmt.Errorf("header field \"format\": %q, want %q", h.Format, Format)
		case h.Version != Version:
			return fmt.Errorf("header field \"version\": %d, this gpufleet reads version %d", h.Version, Version)
		}
		t.Source = h.Source
	case "node":
		var n nodeLine
		if err := decodeStrict(b, &n); err != nil {
			return err
		}
		node, err := n.node()
		if err != nil {
			return err
		}
		if nodes[n.Name] {
			return fmt.Errorf("node field \"name\": node %q appears twice", n.Name)
		}
		nodes[n.Name] = true
		t.Nodes = append(t.Nodes, node)
	case "team":
		var tl teamLine
		if err := decodeStrict(b, &tl); err != nil {
			return err
		}
		team, err := tl.team()
		if err != nil {
			return err
		}
		if teams[team.Name] {
			return fmt.Errorf("team field \"name\": team %q appears twice", team.Name)
		}
		teams[team.Name] = true
		t.Teams = append(t.Teams, team)
	case "task":
		var tl taskLine
		if err := decodeStrict(b, &tl); err != nil {
			return err
		}
		task, err := tl.task()
		if err != nil {
			return err
		}
		t.Tasks = append(t.Tasks, task)
	case "":
		return errors.New(`field "kind" is missing: want header, node, team or task`)
	default:
		return fmt.Errorf("field \"kind\": unknown kind %q, want header, node, team or task", k.Kind)
	}
	*sawData = true
	return nil
}

// decodeStrict decodes one JSON object (already checked to be one, by
// readLine) into v, refusing unknown fields, and names the field in type
// errors.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("field %q: a JSON %s is not allowed here", te.Field, te.Value)
		}
		if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return fmt.Errorf("unknown field %s", msg)
		}
		return err
	}
	return nil
}

func (n nodeLine) node() (core.Node, error) {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("node %q field %q: %s", n.Name, field, fmt.Sprintf(format, args...))
	}
	switch {
	case n.Name == "":
		return core.Node{}, errors.New(`node field "name": must not be empty`)
	case len(n.GPUs) > 0 && (n.GPUCount != 0 || n.GPUModel != "" || n.GPUMemoryMiB != 0):
		return core.Node{}, bad("gpus", "give either gpus or gpuCount with gpuModel, not both")
	case n.GPUCount < 0 || n.GPUCount > maxGPUsPerNode:
		return core.Node{}, bad("gpuCount", "%d is not from 0 to %d", n.GPUCount, maxGPUsPerNode)
	case len(n.GPUs) > maxGPUsPerNode:
		return core.Node{}, bad("gpus", "%d devices, at most %d", len(n.GPUs), maxGPUsPerNode)
	case n.GPUCount > 0 && n.GPUModel == "":
		return core.Node{}, bad("gpuModel", "must be set with gpuCount")
	case n.GPUCount == 0 && (n.GPUModel != "" || n.GPUMemoryMiB != 0):
		return core.Node{}, bad("gpuCount", "must be set with gpuModel or gpuMemoryMiB")
	case n.GPUMemoryMiB < 0:
		return core.Node{}, bad("gpuMemoryMiB", "must not be negative")
	case n.MilliCPU < 0:
		return core.Node{}, bad("milliCPU", "must not be negative")
	case n.MemoryMiB < 0:
		return core.Node{}, bad("memoryMiB", "must not be negative")
	}
	gpus := n.GPUs
	for range n.GPUCount {
		gpus = append(gpus, gpuLine{Model: n.GPUModel, MemoryMiB: n.GPUMemoryMiB})
	}
	node := core.Node{Name: core.NodeName(n.Name), Pool: n.Pool, Region: n.Region, Labels: n.Labels,
		MilliCPU: n.MilliCPU, MemoryMiB: n.MemoryMiB, Schedulable: true}
	for i, g := range gpus {
		switch {
		case g.Model == "":
			return core.Node{}, bad(fmt.Sprintf("gpus[%d].model", i), "must not be empty")
		case g.MemoryMiB < 0:
			return core.Node{}, bad(fmt.Sprintf("gpus[%d].memoryMiB", i), "must not be negative")
		case g.Domain < 0:
			return core.Node{}, bad(fmt.Sprintf("gpus[%d].domain", i), "must not be negative")
		}
		node.GPUs = append(node.GPUs, core.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", n.Name, i), Model: g.Model,
			MemoryMiB: g.MemoryMiB, Domain: g.Domain, Simulated: true})
	}
	return node, nil
}

func (tl teamLine) team() (Team, error) {
	if tl.Name == "" {
		return Team{}, errors.New(`team field "name": must not be empty`)
	}
	t := Team{Name: tl.Name, Limit: core.Unlimited, Weight: 1}
	g, _, err := decimal(tl.GuaranteedGPUs, 3)
	if err != nil {
		return Team{}, fmt.Errorf("team %q field \"guaranteedGPUs\": %w", tl.Name, err)
	}
	t.Guaranteed = g
	if l, ok, err := decimal(tl.LimitGPUs, 3); err != nil {
		return Team{}, fmt.Errorf("team %q field \"limitGPUs\": %w", tl.Name, err)
	} else if ok {
		if l < g {
			return Team{}, fmt.Errorf("team %q field \"limitGPUs\": %s is below the guarantee %s", tl.Name, tl.LimitGPUs, tl.GuaranteedGPUs)
		}
		t.Limit = l
	}
	if tl.Weight < 0 {
		return Team{}, fmt.Errorf("team %q field \"weight\": must be at least 1", tl.Name)
	}
	if tl.Weight > 0 {
		t.Weight = tl.Weight
	}
	return t, nil
}

func (tl taskLine) task() (Task, error) {
	name := tl.Name
	if name == "" {
		name = "(unnamed)"
	}
	bad := func(field string, err error) error {
		return fmt.Errorf("task %q field %q: %w", name, field, err)
	}
	t := Task{Name: tl.Name, Team: tl.Team, Priority: tl.Priority, Runtime: UnknownRuntime,
		Request: core.Request{GPUMemoryMiB: tl.GPUMemoryMiB, GPUModels: tl.GPUModels, MilliCPU: tl.MilliCPU, MemoryMiB: tl.MemoryMiB, Replicas: tl.Replicas}}
	ns, ok, err := decimal(tl.Submitted, 9)
	switch {
	case err != nil:
		return Task{}, bad("submitted", err)
	case !ok:
		return Task{}, bad("submitted", errors.New("is missing: give the seconds from the start of the trace"))
	}
	t.Submitted = time.Duration(ns)
	if ns, ok, err := decimal(tl.RuntimeSeconds, 9); err != nil {
		return Task{}, bad("runtimeSeconds", err)
	} else if ok {
		t.Runtime = time.Duration(ns)
	}
	milli, _, err := decimal(tl.GPUs, 3)
	switch {
	case err != nil:
		return Task{}, bad("gpus", err)
	case milli > 1000 && milli%1000 != 0:
		return Task{}, bad("gpus", fmt.Errorf("%s: above one GPU the count is whole; fractions share one GPU", tl.GPUs))
	case milli > maxGPUsPerTask*1000:
		return Task{}, bad("gpus", fmt.Errorf("%s: at most %d", tl.GPUs, maxGPUsPerTask))
	}
	t.Request.MilliGPU = milli
	switch {
	case tl.GPUMemoryMiB < 0:
		return Task{}, bad("gpuMemoryMiB", errors.New("must not be negative"))
	case tl.GPUMemoryMiB > 0 && t.Request.MilliGPU > 0:
		return Task{}, bad("gpuMemoryMiB", errors.New("give either gpus or gpuMemoryMiB, not both"))
	case tl.MilliCPU < 0:
		return Task{}, bad("milliCPU", errors.New("must not be negative"))
	case tl.MemoryMiB < 0:
		return Task{}, bad("memoryMiB", errors.New("must not be negative"))
	case tl.Replicas < 0 || tl.Replicas > maxTaskReplicas:
		return Task{}, bad("replicas", fmt.Errorf("%d is not from 0 to %d", tl.Replicas, maxTaskReplicas))
	}
	for i, m := range tl.GPUModels {
		if strings.TrimSpace(m) == "" {
			return Task{}, bad(fmt.Sprintf("gpuModels[%d]", i), errors.New("must not be empty"))
		}
	}
	return t, nil
}

// decimal reads an optional JSON number as a count of 10^-digits units
// (parseFixed); absent and null give ok false.
func decimal(raw json.RawMessage, digits int) (v int64, ok bool, err error) {
	s := string(raw)
	switch {
	case s == "" || s == "null":
		return 0, false, nil
	case strings.HasPrefix(s, `"`):
		return 0, false, fmt.Errorf("%s is a string; write a number, such as 2 or 0.25", s)
	}
	v, err = parseFixed(s, digits)
	return v, err == nil, err
}

// parseFixed reads a plain non-negative decimal ("2", "0.25", "12.5") as an
// integer count of 10^-digits units, exactly: more precision than that is an
// error, not a rounding.
func parseFixed(s string, digits int) (int64, error) {
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || strings.Trim(whole, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" || (strings.Contains(s, ".") && frac == "") {
		return 0, fmt.Errorf("%s is not a plain decimal number ≥ 0 (such as 2 or 0.25)", s)
	}
	if t := strings.TrimRight(frac, "0"); len(t) > digits {
		return 0, fmt.Errorf("%s has more than %d decimal places", s, digits)
	} else {
		frac = t
	}
	frac += strings.Repeat("0", digits-len(frac))
	w, err := strconv.ParseInt(whole, 10, 64)
	scale := int64(math.Pow10(digits))
	if err != nil || w > (math.MaxInt64-scale)/scale {
		return 0, fmt.Errorf("%s is too large", s)
	}
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt(frac, 10, 64)
	}
	return w*scale + f, nil
}

// formatFixed writes v units of 10^-digits as a plain decimal, without
// trailing zeros.
func formatFixed(v int64, digits int) string {
	scale := int64(math.Pow10(digits))
	s := strconv.FormatInt(v/scale, 10)
	if f := v % scale; f != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%0*d", digits, f), "0")
	}
	return s
}

// WriteJSONL writes t in gpufleet's JSONL format: a header, then the nodes,
// the teams and the tasks, one per line. Node GPUs are written as a count
// when all are alike. Device UUIDs are not kept: the reader makes them up.
func WriteJSONL(w io.Writer, t Trace) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(headerLine{Kind: "header", Format: Format, Version: Version, Source: t.Source}); err != nil {
		return err
	}
	for _, n := range t.Nodes {
		if err := enc.Encode(toNodeLine(n)); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	for _, tm := range t.Teams {
		l := teamLine{Kind: "team", Name: tm.Name}
		if tm.Guaranteed != 0 {
			l.GuaranteedGPUs = json.RawMessage(formatFixed(tm.Guaranteed, 3))
		}
		if tm.Limit >= 0 {
			l.LimitGPUs = json.RawMessage(formatFixed(tm.Limit, 3))
		}
		if tm.Weight != 1 {
			l.Weight = tm.Weight
		}
		if err := enc.Encode(l); err != nil {
			return fmt.Errorf("team %s: %w", tm.Name, err)
		}
	}
	for _, tk := range t.Tasks {
		if tk.Submitted < 0 || (tk.Runtime < 0 && tk.Runtime != UnknownRuntime) || tk.Request.MilliGPU < 0 {
			return fmt.Errorf("task %s: negative time or GPUs", tk.Name)
		}
		r := tk.Request
		l := taskLine{Kind: "task", Name: tk.Name, Team: tk.Team, Submitted: json.RawMessage(formatFixed(int64(tk.Submitted), 9)),
			GPUs: json.RawMessage(formatFixed(r.MilliGPU, 3)), GPUMemoryMiB: r.GPUMemoryMiB, GPUModels: r.GPUModels,
			MilliCPU: r.MilliCPU, MemoryMiB: r.MemoryMiB, Priority: tk.Priority, Replicas: r.Replicas}
		if tk.Runtime != UnknownRuntime {
			l.RuntimeSeconds = json.RawMessage(formatFixed(int64(tk.Runtime), 9))
		}
		if err := enc.Encode(l); err != nil {
			return fmt.Errorf("task %s: %w", tk.Name, err)
		}
	}
	return bw.Flush()
}

func toNodeLine(n core.Node) nodeLine {
	l := nodeLine{Kind: "node", Name: string(n.Name), MilliCPU: n.MilliCPU, MemoryMiB: n.MemoryMiB, Pool: n.Pool, Region: n.Region, Labels: n.Labels}
	alike := len(n.GPUs) > 0
	for _, g := range n.GPUs {
		if g.Model != n.GPUs[0].Model || g.MemoryMiB != n.GPUs[0].MemoryMiB || g.Domain != 0 {
			alike = false
		}
	}
	if alike {
		l.GPUCount, l.GPUModel, l.GPUMemoryMiB = len(n.GPUs), n.GPUs[0].Model, n.GPUs[0].MemoryMiB
		return l
	}
	for _, g := range n.GPUs {
		l.GPUs = append(l.GPUs, gpuLine{Model: g.Model, MemoryMiB: g.MemoryMiB, Domain: g.Domain})
	}
	return l
}
