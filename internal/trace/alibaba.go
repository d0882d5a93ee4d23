package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Pod is one task of a trace: what it asks for and when it lived.
type Pod struct {
	Name    string
	Request core.Request
	QoS     string
	Phase   string
	// Times in seconds from the start of the trace; Deletion and Scheduled
	// are 0 when the trace has none.
	Creation, Deletion, Scheduled int64
}

// GPUs is what the pod asks for, in milli-GPU (0 for a CPU-only pod).
func (p Pod) GPUs() int64 { return p.Request.MilliGPU }

// ReadNodes reads an openb node list. Every node is schedulable; its GPUs
// get stable made-up UUIDs and no memory figure (the trace has none), so
// fractions are limited by milli-GPU alone. CPU-only nodes (gpu 0) are kept.
func ReadNodes(r io.Reader) ([]core.Node, error) {
	rows, err := readCSV(r, []string{"sn", "cpu_milli", "memory_mib", "gpu", "model"})
	if err != nil {
		return nil, fmt.Errorf("node list: %w", err)
	}
	nodes := make([]core.Node, 0, len(rows))
	for i, row := range rows {
		line := i + 2
		cpu, err1 := strconv.ParseInt(row["cpu_milli"], 10, 64)
		mem, err2 := strconv.ParseInt(row["memory_mib"], 10, 64)
		gpus, err3 := strconv.Atoi(row["gpu"])
		if err := errors.Join(err1, err2, err3); err != nil || cpu < 0 || mem < 0 || gpus < 0 || gpus > 64 {
			return nil, fmt.Errorf("node list line %d: bad number in %v", line, row)
		}
		n := core.Node{Name: core.NodeName(row["sn"]), MilliCPU: cpu, MemoryMiB: mem, Schedulable: true}
		if n.Name == "" {
			return nil, fmt.Errorf("node list line %d: empty sn", line)
		}
		for g := range gpus {
			n.GPUs = append(n.GPUs, core.GPU{Index: g, UUID: fmt.Sprintf("GPU-%s-%d", n.Name, g), Model: row["model"], Simulated: true})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// ReadPods reads an openb pod list. A pod with num_gpu 1 and gpu_milli
// below 1000 asks for that share of one GPU; num_gpu N asks for N whole
// GPUs; gpu_spec ("V100M16|V100M32") becomes the allowed models.
func ReadPods(r io.Reader) ([]Pod, error) {
	// The multigpuNN variants have the first five columns only.
	rows, err := readCSV(r, []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"},
		"gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time")
	if err != nil {
		return nil, fmt.Errorf("pod list: %w", err)
	}
	pods := make([]Pod, 0, len(rows))
	for i, row := range rows {
		line := i + 2
		num := func(col string) (int64, error) {
			if row[col] == "" {
				return 0, nil
			}
			v, err := strconv.ParseInt(row[col], 10, 64)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("pod list line %d: %s %q is not a whole number ≥ 0", line, col, row[col])
			}
			return v, nil
		}
		var vals [7]int64
		for j, col := range []string{"cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "creation_time", "deletion_time", "scheduled_time"} {
			v, err := num(col)
			if err != nil {
				return nil, err
			}
			vals[j] = v
		}
		cpu, mem, numGPU, milli := vals[0], vals[1], vals[2], vals[3]
		p := Pod{Name: row["name"], QoS: row["qos"], Phase: row["pod_phase"], Creation: vals[4], Deletion: vals[5], Scheduled: vals[6],
			Request: core.Request{MilliCPU: cpu, MemoryMiB: mem}}
		switch {
		case numGPU == 0:
		case numGPU == 1 && milli > 0 && milli < 1000:
			p.Request.MilliGPU = milli
		case numGPU <= 64:
			p.Request.MilliGPU = numGPU * 1000
		default:
			return nil, fmt.Errorf("pod list line %d: num_gpu %d is out of range", line, numGPU)
		}
		if spec := strings.TrimSpace(row["gpu_spec"]); spec != "" {
			p.Request.GPUModels = strings.Split(spec, "|")
		}
		pods = append(pods, p)
	}
	return pods, nil
}

// readCSV reads a CSV with a header naming at least the wanted columns, and
// returns each row as a map by column name, with the optional columns
// that the header has ("" where it has not).
func readCSV(r io.Reader, want []string, optional ...string) ([]map[string]string, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	index := map[string]int{}
	for i, h := range header {
		index[strings.TrimSpace(h)] = i
	}
	for _, w := range want {
		if _, ok := index[w]; !ok {
			return nil, fmt.Errorf("header %v lacks column %q", header, w)
		}
	}
	for _, o := range optional {
		if _, ok := index[o]; ok {
			want = append(want, o)
		}
	}
	var rows []map[string]string
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		row := make(map[string]string, len(want))
		for _, w := range want {
			if i := index[w]; i < len(rec) {
				row[w] = strings.TrimSpace(rec[i])
			}
		}
		rows = append(rows, row)
	}
}
