package health

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// DiscoveredGPU is one GPU of dcgmi discovery --list.
type DiscoveredGPU struct {
	// ID is DCGM's GPU ID, the entity ID its diagnostics report.
	ID       int
	Name     string // "" when dcgmi prints <<<NULL>>>
	PCIBusID string
	UUID     string
}

const dcgmNull = "<<<NULL>>>"

var foundRE = regexp.MustCompile(`^(\d+) (\S+?) found\b`)

// ParseDCGMDiscovery reads the output of dcgmi discovery --list: the line
// "N GPUs found." ("N GPUs found (Active)." since DCGM 3.x; "1 GPU found."),
// then a table with one row group per GPU (Name, PCI Bus ID, Device UUID).
// The tables that follow (NvSwitches, ConnectX, CPUs) are ignored. A value
// printed as <<<NULL>>> is empty. It is an error when the count line is
// missing or does not match the rows, or a GPU ID repeats.
func ParseDCGMDiscovery(out string) ([]DiscoveredGPU, error) {
	count := -1
	inGPUs := false
	var gpus []DiscoveredGPU
	seen := map[int]bool{}
	for n, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if m := foundRE.FindStringSubmatch(line); m != nil {
			kind := m[2]
			if (kind == "GPUs" || kind == "GPU") && count < 0 {
				count, _ = strconv.Atoi(m[1])
				inGPUs = true
			} else {
				inGPUs = false
			}
			continue
		}
		if !inGPUs || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 2 {
			continue
		}
		id, info := strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1])
		if id != "" {
			n2, err := strconv.Atoi(id)
			if err != nil {
				continue // the "GPU ID | Device Information" header
			}
			if seen[n2] {
				return nil, fmt.Errorf("dcgmi discovery line %d: GPU ID %d repeated", n+1, n2)
			}
			seen[n2] = true
			gpus = append(gpus, DiscoveredGPU{ID: n2})
		}
		if len(gpus) == 0 {
			continue
		}
		key, val, ok := strings.Cut(info, ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		if val == dcgmNull {
			val = ""
		}
		g := &gpus[len(gpus)-1]
		switch strings.TrimSpace(key) {
		case "Name":
			g.Name = val
		case "PCI Bus ID":
			g.PCIBusID = val
		case "Device UUID":
			g.UUID = val
		}
	}
	if count < 0 {
		return nil, errors.New(`dcgmi discovery: no "N GPUs found" line`)
	}
	if len(gpus) != count {
		return nil, fmt.Errorf("dcgmi discovery: %d GPUs found but %d listed", count, len(gpus))
	}
	return gpus, nil
}

// Diagnostic result statuses, as DiagResult.Status holds them.
const (
	DiagPass   = "Pass"
	DiagFail   = "Fail"
	DiagSkip   = "Skip"
	DiagNotRun = "Not Run"
)

// DiagResult is one test result for one GPU (or for all of them).
type DiagResult struct {
	Test     string
	Category string
	// GPU is the DCGM GPU ID the result is for, -1 for a result on no
	// particular GPU (all of them).
	GPU int
	// Status is Pass, Fail, Skip or Not Run, whichever version wrote it
	// (a Warn counts as Fail, as DCGM 4's JSON renders it).
	Status   string
	Warnings []string
}

// Diag is the parsed output of dcgmi diag -r LEVEL -j.
type Diag struct {
	// Version is DCGM's version: metadata.version (DCGM 4), else the
	// "version" inside the pre-4.0 document; "" if absent.
	Version string
	// Driver is the "Driver Version Detected", "" if absent.
	Driver  string
	Results []DiagResult
	// Overall is Fail when any result failed or DCGM reported a runtime
	// error (or an --iterations run says so), else Pass.
	Overall      string
	RuntimeError string
}

type diagDoc struct {
	V4         *diagBody         `json:"DCGM Diagnostic"`
	V3         *diagBody         `json:"DCGM GPU Diagnostic"`
	Metadata   *diagMeta         `json:"metadata"`
	Iterations []json.RawMessage `json:"iterations"`
	Overall    string            `json:"Overall Result"`
	RuntimeErr string            `json:"runtime_error"`
}

type diagMeta struct {
	Version string `json:"version"`
	Driver  string `json:"Driver Version Detected"`
}

type diagBody struct {
	Categories []struct {
		Category string `json:"category"`
		Tests    []struct {
			Name    string       `json:"name"`
			Results []diagEntity `json:"results"`
			Summary *struct {
				Status string `json:"status"`
			} `json:"test_summary"`
		} `json:"tests"`
	} `json:"test_categories"`
	RuntimeErr string `json:"runtime_error"`
	Version    string `json:"version"`
	Driver     string `json:"Driver Version Detected"`
}

type diagEntity struct {
	EntityGroup   string          `json:"entity_group"`
	EntityGroupID *int            `json:"entity_group_id"`
	EntityID      *int            `json:"entity_id"`
	GPUIDs        json.RawMessage `json:"gpu_ids"`
	GPUID         json.RawMessage `json:"gpu_id"`
	Status        string          `json:"status"`
	Warnings      json.RawMessage `json:"warnings"`
}

// ParseDCGMDiag reads the JSON of dcgmi diag -j, DCGM 4 ("DCGM
// Diagnostic", one result per entity, statuses Pass/Fail/Skip/Not Run,
// versions under "metadata") and earlier ("DCGM GPU Diagnostic",
// "gpu_ids" such as "0,1,2,3" expanded to one result per GPU, or
// "gpu_id", upper-case statuses PASS/FAIL/WARN/SKIP), and the
// {"iterations":[...],"Overall Result":...} wrapper of --iterations, whose
// iterations' results are concatenated. Text before the JSON (dcgmi prints
// errors there) is skipped. Results for entities other than GPUs (CPUs,
// switches) are left out; a result of the entity group None is for all
// GPUs (GPU -1), and so is a test with no result but a test_summary.
func ParseDCGMDiag(out []byte) (Diag, error) {
	i := bytes.IndexByte(out, '{')
	if i < 0 {
		return Diag{}, errors.New("dcgmi diag: no JSON in output")
	}
	var raw json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(out[i:])).Decode(&raw); err != nil {
		return Diag{}, fmt.Errorf("dcgmi diag: %w", err)
	}
	d, err := parseDiagDoc(raw, 0)
	if err != nil {
		return Diag{}, err
	}
	if d.Overall == "" {
		d.Overall = DiagPass
		if d.RuntimeError != "" {
			d.Overall = DiagFail
		}
		for _, r := range d.Results {
			if r.Status == DiagFail {
				d.Overall = DiagFail
			}
		}
	}
	return d, nil
}

func parseDiagDoc(raw json.RawMessage, depth int) (Diag, error) {
	var doc diagDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return Diag{}, fmt.Errorf("dcgmi diag: %w", err)
	}
	var d Diag
	if doc.Iterations != nil {
		if depth > 0 {
			return Diag{}, errors.New("dcgmi diag: nested iterations")
		}
		for n, it := range doc.Iterations {
			sub, err := parseDiagDoc(it, depth+1)
			if err != nil {
				return Diag{}, fmt.Errorf("iteration %d: %w", n+1, err)
			}
			d.Version = cmpOr(d.Version, sub.Version)
			d.Driver = cmpOr(d.Driver, sub.Driver)
			d.RuntimeError = cmpOr(d.RuntimeError, sub.RuntimeError)
			d.Results = append(d.Results, sub.Results...)
		}
		if doc.Overall != "" {
			st, err := normStatus(doc.Overall)
			if err != nil {
				return Diag{}, fmt.Errorf("dcgmi diag: Overall Result: %w", err)
			}
			if st == DiagFail {
				d.Overall = DiagFail
			}
		}
		return d, nil
	}
	body, legacy := doc.V4, false
	if body == nil {
		body, legacy = doc.V3, true
	}
	if body == nil {
		return Diag{}, errors.New(`dcgmi diag: neither "DCGM Diagnostic" nor "DCGM GPU Diagnostic" in JSON`)
	}
	if doc.Metadata != nil {
		d.Version, d.Driver = doc.Metadata.Version, doc.Metadata.Driver
	}
	d.Version = cmpOr(d.Version, body.Version)
	d.Driver = cmpOr(d.Driver, body.Driver)
	d.RuntimeError = cmpOr(body.RuntimeErr, doc.RuntimeErr)
	for _, c := range body.Categories {
		for _, t := range c.Tests {
			if len(t.Results) == 0 {
				if t.Summary != nil && t.Summary.Status != "" {
					st, err := normStatus(t.Summary.Status)
					if err != nil {
						return Diag{}, fmt.Errorf("dcgmi diag: test %q: %w", t.Name, err)
					}
					d.Results = append(d.Results, DiagResult{Test: t.Name, Category: c.Category, GPU: -1, Status: st})
				}
				continue
			}
			for _, e := range t.Results {
				st, err := normStatus(e.Status)
				if err != nil {
					return Diag{}, fmt.Errorf("dcgmi diag: test %q: %w", t.Name, err)
				}
				warns, err := warnings(e.Warnings)
				if err != nil {
					return Diag{}, fmt.Errorf("dcgmi diag: test %q: %w", t.Name, err)
				}
				ids, keep, err := entityGPUs(e, legacy)
				if err != nil {
					return Diag{}, fmt.Errorf("dcgmi diag: test %q: %w", t.Name, err)
				}
				if !keep {
					continue
				}
				for _, id := range ids {
					d.Results = append(d.Results, DiagResult{
						Test: t.Name, Category: c.Category, GPU: id, Status: st,
						Warnings: cloneStrings(warns),
					})
				}
			}
		}
	}
	return d, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}

// normStatus maps either version's status to Pass, Fail, Skip or Not Run.
func normStatus(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "pass":
		return DiagPass, nil
	case "fail", "warn", "warning":
		return DiagFail, nil
	case "skip", "skipped":
		return DiagSkip, nil
	case "not run", "not_run", "notrun":
		return DiagNotRun, nil
	}
	return "", fmt.Errorf("unknown status %q", s)
}

// warnings reads a warnings list: strings (old), objects with a "warning"
// (newer), or null.
func warnings(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("warnings: %w", err)
	}
	var out []string
	for _, it := range items {
		var s string
		if json.Unmarshal(it, &s) == nil {
			out = append(out, s)
			continue
		}
		var o struct {
			Warning string `json:"warning"`
		}
		if err := json.Unmarshal(it, &o); err != nil {
			return nil, fmt.Errorf("warnings: %w", err)
		}
		out = append(out, o.Warning)
	}
	return out, nil
}

// DCGM entity groups (dcgm_field_entity_group_t).
const (
	entityNone = 0
	entityGPU  = 1
)

// entityGPUs returns the GPU IDs a result is for ([-1] for all), and
// whether the result is about GPUs at all.
func entityGPUs(e diagEntity, legacy bool) ([]int, bool, error) {
	if e.EntityGroup != "" || e.EntityGroupID != nil {
		group := -1
		if e.EntityGroupID != nil {
			group = *e.EntityGroupID
		}
		switch {
		case strings.EqualFold(e.EntityGroup, "GPU") || (e.EntityGroup == "" && group == entityGPU):
			if e.EntityID == nil {
				return nil, false, errors.New("GPU result without entity_id")
			}
			return []int{*e.EntityID}, true, nil
		case strings.EqualFold(e.EntityGroup, "None") || (e.EntityGroup == "" && group == entityNone):
			return []int{-1}, true, nil
		}
		return nil, false, nil
	}
	raw := e.GPUIDs
	if len(raw) == 0 {
		raw = e.GPUID
	}
	if len(raw) == 0 || string(raw) == "null" {
		if e.EntityID != nil && !legacy {
			return []int{*e.EntityID}, true, nil
		}
		return []int{-1}, true, nil
	}
	var list string
	var n int
	var arr []json.RawMessage
	switch {
	case json.Unmarshal(raw, &list) == nil:
	case json.Unmarshal(raw, &n) == nil:
		list = strconv.Itoa(n)
	case json.Unmarshal(raw, &arr) == nil:
		var parts []string
		for _, a := range arr {
			parts = append(parts, strings.Trim(string(a), `"`))
		}
		list = strings.Join(parts, ",")
	default:
		return nil, false, fmt.Errorf("bad gpu_ids %s", raw)
	}
	var ids []int
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		id, err := strconv.Atoi(p)
		if err != nil || id < 0 {
			return nil, false, fmt.Errorf("bad GPU ID %q in gpu_ids", p)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return []int{-1}, true, nil
	}
	return ids, true, nil
}

// SimFault makes one simulated test fail for one GPU.
type SimFault struct {
	GPU  int    // the GPU's index
	Diag string // a test name as dcgmi diag reports it: memory, pcie, diagnostic, ...
}

// SimDCGMDiscovery prints what dcgmi discovery --list prints for gpus (their
// Index as the DCGM GPU ID), with made-up PCI bus IDs.
func SimDCGMDiscovery(gpus []core.GPU) string {
	const sep = "+--------+----------------------------------------------------------------------+\n"
	var b strings.Builder
	fmt.Fprintf(&b, "%d GPUs found (Active).\n", len(gpus))
	b.WriteString(sep)
	fmt.Fprintf(&b, "| %-6s | %-68s |\n", "GPU ID", "Device Information")
	b.WriteString(sep)
	for _, g := range gpus {
		name := g.Model
		if name == "" {
			name = dcgmNull
		}
		fmt.Fprintf(&b, "| %-6d | %-68s |\n", g.Index, "Name: "+name)
		fmt.Fprintf(&b, "| %-6s | %-68s |\n", "", "PCI Bus ID: "+simPCI(g.Index))
		fmt.Fprintf(&b, "| %-6s | %-68s |\n", "", "Device UUID: "+g.UUID)
		b.WriteString(sep)
	}
	return b.String()
}

func simPCI(index int) string {
	return fmt.Sprintf("00000000:%02X:00.0", (0x10+index*8)%256)
}

// The simulated DCGM and driver versions.
const (
	simDCGMVersion   = "4.2.3"
	simDriverVersion = "570.124.06"
)

type simTest struct{ category, name string }

// simTests lists the tests dcgmi diag runs at a level, as
// nvvs/src/NvidiaValidationSuite.cpp does (level 3 without the optional
// nvbandwidth, nccl_tests, eud).
func simTests(level int) []simTest {
	var ts []simTest
	for _, n := range []string{"Denylist", "NVML Library", "CUDA Main Library",
		"Permissions and OS-related Blocks", "Persistence Mode", "Environmental Variables",
		"Page Retirement/Row Remap", "Graphics Processes", "Inforom", "Fabric Manager"} {
		ts = append(ts, simTest{"Deployment", n})
	}
	if level >= 2 {
		ts = append(ts, simTest{"Hardware", "memory"}, simTest{"Integration", "pcie"})
	}
	if level >= 3 {
		ts = append(ts, simTest{"Hardware", "diagnostic"},
			simTest{"Stress", "targeted_stress"}, simTest{"Stress", "targeted_power"},
			simTest{"Stress", "memory_bandwidth"})
	}
	if level >= 4 {
		ts = append(ts, simTest{"Stress", "memtest"}, simTest{"Hardware", "pulse_test"})
	}
	return ts
}

type simWarning struct {
	Warning  string `json:"warning"`
	ErrorID  int    `json:"error_id"`
	Category int    `json:"error_category"`
	Severity int    `json:"error_severity"`
}

type simResult struct {
	EntityGroup   string       `json:"entity_group"`
	EntityGroupID int          `json:"entity_group_id"`
	EntityID      int          `json:"entity_id"`
	Status        string       `json:"status"`
	Warnings      []simWarning `json:"warnings,omitempty"`
}

type simTestJSON struct {
	Name    string      `json:"name"`
	Results []simResult `json:"results"`
	Summary struct {
		Status string `json:"status"`
	} `json:"test_summary"`
}

type simCategory struct {
	Category string        `json:"category"`
	Tests    []simTestJSON `json:"tests"`
}

// simFaultWarning is the warning text a simulated failing test reports.
func simFaultWarning(gpu int, test string) string {
	return fmt.Sprintf("GPU %d: simulated fault injected into the %s test", gpu, test)
}

// SimDCGMDiag prints what dcgmi diag -r level -j of DCGM 4 prints for gpus
// (their Index as the DCGM GPU ID): level 1 the deployment tests, 2 adds
// memory and pcie, 3 adds diagnostic, targeted_stress, targeted_power and
// memory_bandwidth, 4 adds memtest and pulse_test; a level below 1 is 1.
// Every result passes but those a fault names (test name compared without
// case, GPU by index), which fail with a warning; a fault on a test the
// level does not run, or on a GPU not in gpus, changes nothing.
func SimDCGMDiag(gpus []core.GPU, level int, faults []SimFault) []byte {
	faulty := map[[2]string]bool{}
	for _, f := range faults {
		faulty[[2]string{strconv.Itoa(f.GPU), strings.ToLower(f.Diag)}] = true
	}
	var cats []simCategory
	for _, t := range simTests(level) {
		if len(cats) == 0 || cats[len(cats)-1].Category != t.category {
			cats = append(cats, simCategory{Category: t.category})
		}
		c := &cats[len(cats)-1]
		tj := simTestJSON{Name: t.name, Results: []simResult{}}
		tj.Summary.Status = DiagPass
		for _, g := range gpus {
			r := simResult{EntityGroup: "GPU", EntityGroupID: entityGPU, EntityID: g.Index, Status: DiagPass}
			if faulty[[2]string{strconv.Itoa(g.Index), strings.ToLower(t.name)}] {
				r.Status = DiagFail
				r.Warnings = []simWarning{{Warning: simFaultWarning(g.Index, t.name), ErrorID: 1, Category: 1, Severity: 2}}
				tj.Summary.Status = DiagFail
			}
			tj.Results = append(tj.Results, r)
		}
		c.Tests = append(c.Tests, tj)
	}
	type entity struct {
		EntityID int    `json:"entity_id"`
		Serial   string `json:"serial_num"`
		DeviceID string `json:"device_id"`
	}
	ents := []entity{}
	for _, g := range gpus {
		ents = append(ents, entity{EntityID: g.Index, Serial: fmt.Sprintf("SIM%010d", g.Index), DeviceID: "2330"})
	}
	doc := struct {
		Diag struct {
			Categories []simCategory `json:"test_categories"`
		} `json:"DCGM Diagnostic"`
		Groups []struct {
			Group    string   `json:"entity_group"`
			GroupID  int      `json:"entity_group_id"`
			Entities []entity `json:"entities"`
		} `json:"entity_groups"`
		Metadata diagMeta `json:"metadata"`
	}{}
	doc.Diag.Categories = cats
	doc.Groups = append(doc.Groups, struct {
		Group    string   `json:"entity_group"`
		GroupID  int      `json:"entity_group_id"`
		Entities []entity `json:"entities"`
	}{"GPU", entityGPU, ents})
	doc.Metadata = diagMeta{Version: simDCGMVersion, Driver: simDriverVersion}
	out, err := json.MarshalIndent(doc, "", "    ")
	if err != nil {
		panic(err) // plain structs always marshal
	}
	return append(out, '\n')
}

// SimTestLevel returns the lowest level at which dcgmi diag runs a test (as
// the simulator knows them), or 0 for a test it does not run.
func SimTestLevel(name string) int {
	for level := 1; level <= 4; level++ {
		for _, t := range simTests(level) {
			if t.name == name {
				return level
			}
		}
	}
	return 0
}
