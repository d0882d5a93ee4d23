package core_test

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestParseOutputs(t *testing.T) {
	maxLine := "accepted=1000000000000 rejected=1000000000000"
	tests := []struct {
		name     string
		data     string
		want     core.Outputs
		reported bool
		bad      []string // a substring of each note, in order
	}{
		{name: "empty", data: ""},
		{name: "blank and comments only", data: "\n   \n# accepted=5\n\t# x\n"},
		{name: "one line", data: "accepted=120 rejected=3 unit=images\n",
			want: core.Outputs{Accepted: 120, Rejected: 3, Unit: "images"}, reported: true},
		{name: "lines add up", data: "accepted=120 rejected=3 unit=images\naccepted=80 rejected=0 unit=images\n",
			want: core.Outputs{Accepted: 200, Rejected: 3, Unit: "images"}, reported: true},
		{name: "no final newline, CRLF, tabs, any order, any case", data: "unit=tok\r\n  Rejected=2\tACCEPTED=7 ",
			want: core.Outputs{Accepted: 7, Rejected: 2, Unit: "tok"}, reported: true},
		{name: "zero is a report", data: "accepted=0\n", reported: true},
		{name: "unit alone is a report", data: "unit=images\n", want: core.Outputs{Unit: "images"}, reported: true},
		{name: "first unit stays, a different one makes it mixed", data: "accepted=1\naccepted=1 unit=a\naccepted=1\naccepted=1 unit=a\naccepted=1 unit=b\naccepted=1 unit=a\n",
			want: core.Outputs{Accepted: 6, Unit: "mixed"}, reported: true},
		{name: "egress in bytes and in GiB", data: "egressBytes=1000\negressGiB=1.5\negressGiB=2\negressGiB=.25\negressGiB=3.\n",
			want: core.Outputs{EgressBytes: 1000 + 3<<29 + 2<<30 + 1<<28 + 3<<30}, reported: true},
		{name: "GiB past nine decimals and parts of a byte are dropped", data: "egressGiB=0.0000000019999\n",
			want: core.Outputs{EgressBytes: 1}, reported: true}, // 1e-9 GiB = 1.07 bytes
		{name: "largest values", data: "accepted=1000000000000 rejected=1000000000000 egressBytes=9007199254740991\n",
			want: core.Outputs{Accepted: 1e12, Rejected: 1e12, EgressBytes: core.MaxOutputsTotal}, reported: true},
		{name: "largest GiB", data: "egressGiB=8388607.999999999\n",
			want: core.Outputs{EgressBytes: 8388607<<30 + 999999999*(1<<30)/1_000_000_000}, reported: true},
		{name: "sums saturate", data: strings.Repeat(maxLine+" egressBytes=9007199254740991\n", 9008),
			want: core.Outputs{Accepted: core.MaxOutputsTotal, Rejected: core.MaxOutputsTotal, EgressBytes: core.MaxOutputsTotal}, reported: true},
		{name: "a malformed line is skipped whole",
			data: "accepted=5\naccepted=7 rejected=-1\naccepted=1 unit=images\n",
			want: core.Outputs{Accepted: 6, Unit: "images"}, reported: true,
			bad: []string{`line 2: rejected: "-1" is negative: "accepted=7 rejected=-1"`}},
		{name: "every kind of bad line", reported: true, want: core.Outputs{Accepted: 1},
			data: strings.Join([]string{
				"accepted=1",
				"accepted",
				"=5",
				"accepted=1.5",
				"accepted=+3",
				"accepted=0x10",
				"accepted=1_000",
				"accepted=1000000000001",
				"rejected=99999999999999999999",
				"egressBytes=9007199254740992",
				"egressGiB=8388608",
				"egressGiB=-1",
				"egressGiB=1e3",
				"egressGiB=.",
			}, "\n"),
			bad: []string{
				`line 2: "accepted": want key=value`,
				`line 3: "=5": want key=value`,
				`line 4: accepted: "1.5": want a whole number`,
				`line 5: accepted: "+3": want a whole number`,
				`line 6: accepted: "0x10": want a whole number`,
				`line 7: accepted: "1_000": want a whole number`,
				`line 8: accepted: "1000000000001": want at most 1000000000000`,
				`line 9: rejected: "99999999999999999999": want at most`,
				`line 10: egressBytes: "9007199254740992": want at most 9007199254740991`,
				"and 4 more malformed lines",
			}},
		{name: "bad keys and units",
			data: "colour=red\naccepted=1 accepted=2\negressBytes=1 egressGiB=1\nunit=\nunit=\"x\"\nunit=a=b\nunit=" + strings.Repeat("u", 33) + "\nunit=" + strings.Repeat("u", 32) + "\n",
			want: core.Outputs{Unit: strings.Repeat("u", 32)}, reported: true,
			bad: []string{
				`line 1: unknown key "colour"`,
				`line 2: "accepted" given twice`,
				`line 3: "egressGiB" given twice`,
				`line 4: unit: want a word of 1 to 32 characters`,
				`line 5: unit: ""x"": want a word of letters`,
				`line 6: unit: "a=b": want a word`,
				`line 7: unit: want a word of 1 to 32 characters`,
			}},
		{name: "malformed only reports nothing", data: "accepted=x\n", bad: []string{`line 1: accepted: "x"`}},
		{name: "exactly ten malformed lines are all named", data: strings.Repeat("x\n", 10),
			bad: []string{"line 1:", "line 2:", "line 3:", "line 4:", "line 5:", "line 6:", "line 7:", "line 8:", "line 9:", "line 10:"}},
		{name: "eleven: nine named and a count", data: strings.Repeat("x\n", 11),
			bad: []string{"line 1:", "line 2:", "line 3:", "line 4:", "line 5:", "line 6:", "line 7:", "line 8:", "line 9:", "and 2 more malformed lines"}},
		{name: "a long line is quoted in part", data: "accepted=1 " + strings.Repeat("k", 300) + "=1\n",
			bad: []string{`: "accepted=1 kkkk`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reported, bad := core.ParseOutputsReport([]byte(tt.data))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("outputs (-want +got):\n%s", diff)
			}
			if reported != tt.reported {
				t.Errorf("reported = %v, want %v", reported, tt.reported)
			}
			if len(bad) != len(tt.bad) {
				t.Fatalf("malformed = %q, want %d notes like %q", bad, len(tt.bad), tt.bad)
			}
			for i := range bad {
				if !strings.Contains(bad[i], tt.bad[i]) {
					t.Errorf("malformed[%d] = %q, want it to contain %q", i, bad[i], tt.bad[i])
				}
			}
			out, bad2 := core.ParseOutputs([]byte(tt.data))
			if diff := cmp.Diff(got, out); diff != "" || !cmp.Equal(bad, bad2) {
				t.Errorf("ParseOutputs differs from ParseOutputsReport: %s %q %q", diff, bad, bad2)
			}
		})
	}
}

func TestParseOutputsQuotesBoundedLines(t *testing.T) {
	line := "bad " + strings.Repeat("é", 200) + "\x00\xff"
	_, bad := core.ParseOutputs([]byte(line))
	if len(bad) != 1 {
		t.Fatalf("malformed = %q, want one note", bad)
	}
	q := bad[0][strings.LastIndex(bad[0], ": ")+2:]
	if !strings.HasSuffix(q, `"...`) || len(q) > 100+5 || !strings.HasPrefix(q, `"bad éé`) {
		t.Errorf("quoted line %q (%d bytes): want at most the first 100 bytes, cut at a rune, marked", q, len(q))
	}
	_, bad = core.ParseOutputs([]byte("x\x00\xff\n"))
	if len(bad) != 1 || !strings.HasSuffix(bad[0], `"x??"`) {
		t.Errorf("malformed = %q, want the unprintable bytes as ?", bad)
	}
}

// outputsLine is one valid line as a workload might write it, and what it
// reports.
type outputsLine struct {
	text string
	want core.Outputs
}

func genOutputsLine(t *rapid.T) outputsLine {
	var fields []string
	var o core.Outputs
	key := func(k string) string {
		if rapid.Bool().Draw(t, "upper") {
			return strings.ToUpper(k)
		}
		return k
	}
	if rapid.Bool().Draw(t, "hasAccepted") {
		o.Accepted = rapid.Int64Range(0, core.MaxOutputCount).Draw(t, "accepted")
		fields = append(fields, key("accepted")+"="+strconv.FormatInt(o.Accepted, 10))
	}
	if rapid.Bool().Draw(t, "hasRejected") {
		o.Rejected = rapid.Int64Range(0, core.MaxOutputCount).Draw(t, "rejected")
		fields = append(fields, key("rejected")+"="+strconv.FormatInt(o.Rejected, 10))
	}
	if rapid.Bool().Draw(t, "hasUnit") {
		o.Unit = rapid.SampledFrom([]string{"images", "tokens", "job", "a-b_c.d:e/f", strings.Repeat("z", 32)}).Draw(t, "unit")
		fields = append(fields, key("unit")+"="+o.Unit)
	}
	switch rapid.IntRange(0, 2).Draw(t, "egress") {
	case 1:
		o.EgressBytes = rapid.Int64Range(0, core.MaxOutputsTotal).Draw(t, "egressBytes")
		fields = append(fields, key("egressBytes")+"="+strconv.FormatInt(o.EgressBytes, 10))
	case 2:
		whole := rapid.Int64Range(0, core.MaxOutputsTotal>>30-1).Draw(t, "gib")
		frac := rapid.StringMatching(`[0-9]{0,12}`).Draw(t, "frac")
		// The model: floor((whole + 0.frac[:9]) × 2^30), in exact rationals.
		f9 := frac
		if len(f9) > 9 {
			f9 = f9[:9]
		}
		r, _ := new(big.Rat).SetString(strconv.FormatInt(whole, 10) + "." + f9 + "0")
		r.Mul(r, new(big.Rat).SetInt64(1<<30))
		o.EgressBytes = new(big.Int).Quo(r.Num(), r.Denom()).Int64()
		fields = append(fields, key("egressGiB")+"="+strconv.FormatInt(whole, 10)+"."+frac)
	}
	fields = rapid.Permutation(fields).Draw(t, "order")
	sep := rapid.SampledFrom([]string{" ", "  ", "\t", " \t "}).Draw(t, "sep")
	text := strings.Join(fields, sep)
	if len(fields) == 0 {
		text = "" // a blank line: no report
	}
	return outputsLine{text: text, want: o}
}

// TestParseOutputsSumsValidLines: any mix of valid, blank, comment and
// malformed lines reports the saturated sums of the valid ones, with one
// note per malformed line (as far as notes are kept).
func TestParseOutputsSumsValidLines(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 30).Draw(t, "lines")
		var text []string
		var acc, rej, egr big.Int
		unit, units := "", map[string]bool{}
		reported, bad := false, 0
		for i := range n {
			switch rapid.IntRange(0, 5).Draw(t, fmt.Sprint("kind", i)) {
			case 0:
				text = append(text, rapid.SampledFrom([]string{"", "   ", "# accepted=5", "  #x=y"}).Draw(t, "ignored"))
			case 1:
				text = append(text, rapid.SampledFrom([]string{"accepted=-1", "accepted=5 bogus=1", "rejected=1e3", "unit=a b=", "unit=\"q\"", "accepted=1 accepted=1", "egressGiB=1e9"}).Draw(t, "malformed"))
				bad++
			default:
				l := genOutputsLine(t)
				text = append(text, l.text)
				if l.text == "" {
					continue
				}
				reported = true
				acc.Add(&acc, big.NewInt(l.want.Accepted))
				rej.Add(&rej, big.NewInt(l.want.Rejected))
				egr.Add(&egr, big.NewInt(l.want.EgressBytes))
				if l.want.Unit != "" {
					if unit == "" {
						unit = l.want.Unit
					}
					units[l.want.Unit] = true
				}
			}
		}
		if len(units) > 1 {
			unit = "mixed"
		}
		sat := func(x *big.Int) int64 {
			if x.Cmp(big.NewInt(core.MaxOutputsTotal)) > 0 {
				return core.MaxOutputsTotal
			}
			return x.Int64()
		}
		want := core.Outputs{Accepted: sat(&acc), Rejected: sat(&rej), EgressBytes: sat(&egr), Unit: unit}
		got, rep, notes := core.ParseOutputsReport([]byte(strings.Join(text, "\n")))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("outputs (-want +got):\n%s", diff)
		}
		if rep != reported {
			t.Fatalf("reported = %v, want %v", rep, reported)
		}
		if wantNotes := min(bad, core.MaxOutputsMalformed); len(notes) != wantNotes {
			t.Fatalf("%d notes %q, want %d for %d malformed lines", len(notes), notes, wantNotes, bad)
		}
	})
}

// TestParseOutputsNeverPanics feeds arbitrary bytes, and lines made of
// the report's own pieces: it never panics, keeps its bounds, and never
// reports a negative or oversized total.
func TestParseOutputsNeverPanics(t *testing.T) {
	pieces := []string{"accepted", "rejected", "unit", "egressBytes", "egressGiB", "=", "-", ".", "0", "9",
		"1000000000000", "9007199254740991", "99999999999999999999", " ", "\t", "\n", "\r", "#", "\"", "é", "\x00", "\xff", "x"}
	rapid.Check(t, func(t *rapid.T) {
		var data []byte
		if rapid.Bool().Draw(t, "raw") {
			data = rapid.SliceOfN(rapid.Byte(), 0, 2000).Draw(t, "bytes")
		} else {
			data = []byte(strings.Join(rapid.SliceOfN(rapid.SampledFrom(pieces), 0, 300).Draw(t, "pieces"), ""))
		}
		out, notes := core.ParseOutputs(data)
		for _, v := range []int64{out.Accepted, out.Rejected, out.EgressBytes} {
			if v < 0 || v > core.MaxOutputsTotal {
				t.Fatalf("total %d out of [0, %d]: %+v", v, int64(core.MaxOutputsTotal), out)
			}
		}
		if len(out.Unit) > core.MaxOutputsUnit && out.Unit != "mixed" {
			t.Fatalf("unit %q longer than %d", out.Unit, core.MaxOutputsUnit)
		}
		if len(notes) > core.MaxOutputsMalformed {
			t.Fatalf("%d notes, want at most %d", len(notes), core.MaxOutputsMalformed)
		}
		for _, n := range notes {
			if len(n) > 300 {
				t.Fatalf("note of %d bytes: %q", len(n), n)
			}
		}
	})
}
