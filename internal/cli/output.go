package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/gpufleet/api"
)

// Output formats for -o.
const (
	outTable = "table"
	outWide  = "wide"
	outJSON  = "json"
	outYAML  = "yaml"
)

// outputFlag is the -o flag of one verb: its value and the formats the verb
// knows. The first format is the default.
type outputFlag struct {
	value   string
	allowed []string
}

func addOutputFlag(cmd *cobra.Command, allowed ...string) *outputFlag {
	o := &outputFlag{value: allowed[0], allowed: allowed}
	cmd.Flags().StringVarP(&o.value, "output", "o", o.value, "output format: "+strings.Join(allowed, ", "))
	return o
}

// check returns a usage error when -o names a format the verb does not know.
func (o *outputFlag) check() error {
	if !slices.Contains(o.allowed, o.value) {
		return usagef("-o %q: want one of %s", o.value, strings.Join(o.allowed, ", "))
	}
	return nil
}

// structured reports whether -o asks for json or yaml, and prints v so if it
// does.
func (o *outputFlag) structured(w io.Writer, v any) (bool, error) {
	switch o.value {
	case outJSON:
		return true, printJSON(w, v)
	case outYAML:
		return true, printYAML(w, v)
	}
	return false, nil
}

// printJSON writes v as JSON indented by two spaces, HTML characters left
// alone (commands often hold '<', '>' and '&').
func printJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// printYAML writes v as YAML, through its JSON form so that field names are
// the API's.
func printYAML(w io.Writer, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// list wraps items in the API's list envelope, with [] rather than null when
// there are none.
func list[T any](items []T) api.List[T] {
	if items == nil {
		items = []T{}
	}
	return api.List[T]{Items: items}
}

// table writes aligned columns; call flush at the end. An empty cell shows
// as "-".
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: newTabWriter(w)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

// newTabWriter returns a tabwriter with the house spacing whose lines carry
// no trailing blanks.
func newTabWriter(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(&trimWriter{w: w}, 0, 4, 2, ' ', 0)
}

// trimWriter drops the blanks at the end of each line written through it;
// tabwriter pads the last cell of a line when later lines have more.
type trimWriter struct {
	w       io.Writer
	pending []byte // blanks not yet known to be trailing
}

func (t *trimWriter) Write(p []byte) (int, error) {
	var out []byte
	for _, c := range p {
		switch c {
		case ' ':
			t.pending = append(t.pending, c)
		case '\n':
			t.pending = t.pending[:0]
			out = append(out, c)
		default:
			out = append(out, t.pending...)
			t.pending = t.pending[:0]
			out = append(out, c)
		}
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
		// A tab or newline inside a cell would break the columns.
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(cells[i])
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// formatMiB renders MiB as GiB when it is a whole number of them.
func formatMiB(m int64) string {
	if m != 0 && m%1024 == 0 {
		return strconv.FormatInt(m/1024, 10) + "GiB"
	}
	return strconv.FormatInt(m, 10) + "MiB"
}

// formatGPURequest is the GPU ask of a workload: "2", "0.25" or, for a
// share by memory, "20GiB".
func formatGPURequest(r api.Resources) string {
	if r.GPUMemoryMiB > 0 {
		return formatMiB(r.GPUMemoryMiB)
	}
	return r.GPUs.String()
}

// formatAge renders how long ago t was, kubectl style: 45s, 12m, 5h, 3d.
func formatAge(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}

// formatTime renders a time as RFC 3339, or "" for none.
func formatTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339)
}

// placementNodes lists the distinct nodes a workload runs on.
func placementNodes(ps []api.Placement) string {
	var nodes []string
	for _, p := range ps {
		if !slices.Contains(nodes, p.Node) {
			nodes = append(nodes, p.Node)
		}
	}
	return strings.Join(nodes, ",")
}

// formatExitCode renders an exit code, or "" when there is none.
func formatExitCode(c *int) string {
	if c == nil {
		return ""
	}
	return strconv.Itoa(*c)
}

// quoteArgs renders argv so that it can be read back as a shell would split
// it.
func quoteArgs(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && !strings.ContainsFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
		}) {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
