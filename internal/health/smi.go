package health

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// ListedGPU is one GPU line of nvidia-smi -L.
type ListedGPU struct {
	Index int
	Model string
	UUID  string
	// MIG holds the UUIDs of the MIG devices listed under the GPU, in
	// order; nil when MIG is off.
	MIG []string
}

var (
	listGPURE = regexp.MustCompile(`^GPU (\d+): (.*?) \(UUID: ([^)]*)\)$`)
	listMIGRE = regexp.MustCompile(`^MIG .*\(UUID: ([^)]*)\)$`)
	ansiRE    = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")
)

// ParseNvidiaSMIList reads the output of nvidia-smi -L: one "GPU N: MODEL
// (UUID: GPU-...)" line per GPU, each possibly followed by indented MIG
// device lines, which are kept in the GPU's MIG list. Any other non-blank
// line ("No devices were found", a driver error) is an error, and so are
// an output with no GPU and a repeated index.
func ParseNvidiaSMIList(out string) ([]ListedGPU, error) {
	var gpus []ListedGPU
	seen := map[int]bool{}
	for n, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" {
			continue
		}
		if m := listGPURE.FindStringSubmatch(line); m != nil {
			idx, err := strconv.Atoi(m[1])
			if err != nil {
				return nil, fmt.Errorf("nvidia-smi -L line %d: bad index %q", n+1, m[1])
			}
			if seen[idx] {
				return nil, fmt.Errorf("nvidia-smi -L line %d: GPU %d listed twice", n+1, idx)
			}
			seen[idx] = true
			gpus = append(gpus, ListedGPU{Index: idx, Model: strings.TrimSpace(m[2]), UUID: m[3]})
			continue
		}
		if m := listMIGRE.FindStringSubmatch(line); m != nil {
			if len(gpus) == 0 {
				return nil, fmt.Errorf("nvidia-smi -L line %d: MIG device before any GPU", n+1)
			}
			last := &gpus[len(gpus)-1]
			last.MIG = append(last.MIG, m[1])
			continue
		}
		return nil, fmt.Errorf("nvidia-smi -L line %d: unexpected %q", n+1, line)
	}
	if len(gpus) == 0 {
		return nil, errors.New("nvidia-smi -L lists no GPU")
	}
	return gpus, nil
}

// Topology is the GPU part of the matrix nvidia-smi topo -m prints.
type Topology struct {
	// GPUs are the GPU column labels in order ("GPU0", "GPU1", ...).
	GPUs []string
	// Link is the connection code between two GPUs, keyed by their
	// indices (row, column): "X" for a GPU with itself, "NV18", "SYS",
	// "NODE", "PHB", "PXB", "PIX".
	Link map[[2]int]string
	// Domains maps each GPU index to its NVLink domain: the connected
	// components of the NV# links, numbered from 0 in order of their
	// lowest GPU index, a GPU without NVLink a domain of its own; without
	// any NVLink at all every GPU is in domain 0 (a flat node: the
	// topology gives no reason to prefer some GPUs over others). This is
	// the one rule for core.GPU.Domain, internal/gpu's discovery included.
	Domains map[int]int
	// NVLink: some GPUs are linked by NVLink.
	NVLink bool
}

// ParseTopo reads the output of nvidia-smi topo -m. The matrix is
// tab-separated (space-separated output is read too), its header may be
// wrapped in ANSI escapes (an underline), NIC rows and columns, the
// affinity columns, the legend and the NIC legend are ignored. Every GPU
// column needs a row with a link code for every GPU column.
func ParseTopo(out string) (Topology, error) {
	out = ansiRE.ReplaceAllString(out, "")
	var (
		t      Topology
		cols   []int // GPU index of each GPU column
		pos    []int // cell position of each GPU column in a row
		inRows bool
	)
	rows := map[int]bool{}
	for n, raw := range strings.Split(out, "\n") {
		raw = strings.TrimSuffix(raw, "\r")
		cells := topoCells(raw)
		if len(cells) == 0 {
			if inRows {
				break // the blank line before the legend ends the matrix
			}
			continue
		}
		if cols == nil {
			first := 0
			if cells[0] == "" {
				first = 1
			}
			if first >= len(cells) || gpuLabel(cells[first]) < 0 {
				continue
			}
			// Header: positions in the header line up with the row's
			// cells when the line starts with a separator (tabs);
			// otherwise the row's label shifts them by one.
			shift := 1 - first
			for i := first; i < len(cells); i++ {
				idx := gpuLabel(cells[i])
				if idx < 0 {
					continue
				}
				if slices.Contains(cols, idx) {
					return Topology{}, fmt.Errorf("topo -m: column GPU%d repeated", idx)
				}
				cols = append(cols, idx)
				pos = append(pos, i+shift)
				t.GPUs = append(t.GPUs, cells[i])
			}
			continue
		}
		if strings.HasPrefix(cells[0], "Legend") {
			break
		}
		from := gpuLabel(cells[0])
		if from < 0 {
			if strings.HasPrefix(cells[0], "NIC") {
				inRows = true
				continue
			}
			return Topology{}, fmt.Errorf("topo -m line %d: unexpected row %q", n+1, cells[0])
		}
		inRows = true
		if !slices.Contains(cols, from) {
			return Topology{}, fmt.Errorf("topo -m line %d: row GPU%d is not a column", n+1, from)
		}
		if rows[from] {
			return Topology{}, fmt.Errorf("topo -m line %d: row GPU%d repeated", n+1, from)
		}
		rows[from] = true
		if t.Link == nil {
			t.Link = map[[2]int]string{}
		}
		for j, to := range cols {
			if pos[j] >= len(cells) || cells[pos[j]] == "" {
				return Topology{}, fmt.Errorf("topo -m line %d: GPU%d has no link to GPU%d", n+1, from, to)
			}
			t.Link[[2]int{from, to}] = cells[pos[j]]
		}
	}
	if cols == nil {
		return Topology{}, errors.New("topo -m: no GPU columns")
	}
	for _, c := range cols {
		if !rows[c] {
			return Topology{}, fmt.Errorf("topo -m: no row for GPU%d", c)
		}
	}
	t.Domains, t.NVLink = nvlinkDomains(cols, t.Link)
	return t, nil
}

// topoCells splits a matrix line into trimmed cells: on tabs when it has
// any, else on runs of spaces.
func topoCells(line string) []string {
	if strings.TrimSpace(line) == "" {
		return nil
	}
	if !strings.Contains(line, "\t") {
		return strings.Fields(line)
	}
	cells := strings.Split(line, "\t")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// gpuLabel returns N for a cell "GPUN", else -1.
func gpuLabel(cell string) int {
	s, ok := strings.CutPrefix(cell, "GPU")
	if !ok || s == "" {
		return -1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strconv.Itoa(n) != s {
		return -1
	}
	return n
}

// isNVLink reports whether a link code is "NV" followed by a count.
func isNVLink(code string) bool {
	s, ok := strings.CutPrefix(code, "NV")
	if !ok || s == "" {
		return false
	}
	_, err := strconv.Atoi(s)
	return err == nil
}

func nvlinkDomains(cols []int, link map[[2]int]string) (map[int]int, bool) {
	parent := map[int]int{}
	for _, c := range cols {
		parent[c] = c
	}
	var find func(int) int
	find = func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	nvlink := false
	for k, code := range link {
		if isNVLink(code) {
			nvlink = true
			a, b := find(k[0]), find(k[1])
			if a != b {
				parent[a] = b
			}
		}
	}
	sorted := slices.Sorted(slices.Values(cols))
	ids := map[int]int{}
	domains := make(map[int]int, len(cols))
	for _, c := range sorted {
		r := find(c)
		if !nvlink {
			r = sorted[0]
		}
		if _, ok := ids[r]; !ok {
			ids[r] = len(ids)
		}
		domains[c] = ids[r]
	}
	return domains, nvlink
}

// SimNvidiaSMIList prints what nvidia-smi -L prints for gpus, in their
// order.
func SimNvidiaSMIList(gpus []core.GPU) string {
	var b strings.Builder
	for _, g := range gpus {
		fmt.Fprintf(&b, "GPU %d: %s (UUID: %s)\n", g.Index, g.Model, g.UUID)
	}
	return b.String()
}

// SimTopo prints what nvidia-smi topo -m prints for gpus, in their order:
// NV18 between GPUs of one Domain, SYS across domains, tab-separated, with
// the affinity columns and the legend.
func SimTopo(gpus []core.GPU) string {
	var b strings.Builder
	for _, g := range gpus {
		fmt.Fprintf(&b, "\tGPU%d", g.Index)
	}
	b.WriteString("\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n")
	for _, g := range gpus {
		fmt.Fprintf(&b, "GPU%d", g.Index)
		for _, h := range gpus {
			switch {
			case h.Index == g.Index:
				b.WriteString("\t X ")
			case h.Domain == g.Domain:
				b.WriteString("\tNV18")
			default:
				b.WriteString("\tSYS")
			}
		}
		b.WriteString("\t0-63\t0\t\tN/A\n")
	}
	b.WriteString(topoLegend)
	return b.String()
}

const topoLegend = `
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
`
