package core

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of an outputs report (see ParseOutputs).
const (
	// MaxOutputCount bounds the accepted or rejected outputs of one line.
	MaxOutputCount = 1_000_000_000_000
	// MaxOutputsTotal is where the sums of a report saturate, and the bound
	// of a line's egress in bytes: 2^53-1, the largest integer a JSON
	// reader that uses doubles (the portal) still reads exactly. Totals of
	// many reports added with Outputs.Add stay far from overflowing int64.
	MaxOutputsTotal = 1<<53 - 1
	// MaxOutputsUnit bounds the length of a unit, in bytes.
	MaxOutputsUnit = 32
	// MaxOutputsMalformed bounds the notes ParseOutputs returns.
	MaxOutputsMalformed = 10
	// maxQuoted bounds how much of a malformed line a note quotes.
	maxQuoted = 100
)

// ParseOutputs reads an outputs report: lines of key=value pairs separated
// by spaces or tabs, such as
//
//	accepted=120 rejected=3 unit=images
//	accepted=80 rejected=0 egressGiB=1.5
//
// with keys (case does not matter):
//
//   - accepted, rejected: whole numbers from 0 to MaxOutputCount;
//   - unit: a word of 1 to MaxOutputsUnit ASCII letters, digits or
//     "-_.:/" (so no '=', quotes or spaces);
//   - egressBytes: a whole number of bytes, at most MaxOutputsTotal;
//   - egressGiB: a decimal number of GiB (2^30 bytes), such as 1.5, turned
//     into bytes (digits past the ninth decimal are ignored, and a part of a
//     byte is dropped), at most MaxOutputsTotal bytes.
//
// Every line adds to the totals (a workload appends a line per batch): the
// counts and egress add up, saturating at MaxOutputsTotal; the unit is the
// first one given, and a later different one makes it "mixed" (Outputs.Add).
// Blank lines and lines that start with '#' are ignored. A malformed line
// (not key=value, an unknown or repeated key, a bad, negative or too large
// number, a bad unit) is skipped whole, and a note naming it, its number and
// why, quoting at most its first 100 bytes (unprintable bytes as '?'), is
// returned in malformed: at most MaxOutputsMalformed notes, the last of
// which counts the rest when there are more. ParseOutputs never fails and never panics.
func ParseOutputs(data []byte) (out Outputs, malformed []string) {
	out, _, malformed = ParseOutputsReport(data)
	return out, malformed
}

// ParseOutputsReport is ParseOutputs that also says whether the data
// reported anything: reported is true when at least one line was valid
// (a line "accepted=0" reports zero; a file of blank, comment or malformed
// lines reports nothing).
func ParseOutputsReport(data []byte) (out Outputs, reported bool, malformed []string) {
	bad := 0
	for n := 1; len(data) > 0; n++ {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		s := strings.TrimSpace(string(line))
		if s == "" || s[0] == '#' {
			continue
		}
		o, err := parseOutputsLine(s)
		if err != nil {
			bad++
			if bad <= MaxOutputsMalformed {
				malformed = append(malformed, fmt.Sprintf("line %d: %v: %s", n, err, quoteLine(s, maxQuoted)))
			}
			continue
		}
		reported = true
		out.addSaturating(o)
	}
	if bad > MaxOutputsMalformed {
		malformed[MaxOutputsMalformed-1] = fmt.Sprintf("and %d more malformed lines", bad-(MaxOutputsMalformed-1))
	}
	return out, reported, malformed
}

// addSaturating adds o2 to o as Add does, but its sums stop at
// MaxOutputsTotal.
func (o *Outputs) addSaturating(o2 Outputs) {
	acc := satAdd(o.Accepted, o2.Accepted)
	rej := satAdd(o.Rejected, o2.Rejected)
	egr := satAdd(o.EgressBytes, o2.EgressBytes)
	o.Add(Outputs{Unit: o2.Unit})
	o.Accepted, o.Rejected, o.EgressBytes = acc, rej, egr
}

// satAdd adds two numbers from 0 to MaxOutputsTotal, stopping there.
func satAdd(a, b int64) int64 {
	if a > MaxOutputsTotal-b {
		return MaxOutputsTotal
	}
	return a + b
}

// parseOutputsLine parses one line that is neither blank nor a comment.
func parseOutputsLine(s string) (Outputs, error) {
	var o Outputs
	seen := map[string]bool{}
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return Outputs{}, fmt.Errorf("%s: want key=value", quoteWord(f))
		}
		key := strings.ToLower(k)
		if key == "egressgib" {
			key = "egressbytes" // one egress per line, however written
		}
		if seen[key] {
			return Outputs{}, fmt.Errorf("%s given twice", quoteWord(k))
		}
		seen[key] = true
		var err error
		switch strings.ToLower(k) {
		case "accepted":
			o.Accepted, err = parseCount(v, MaxOutputCount)
		case "rejected":
			o.Rejected, err = parseCount(v, MaxOutputCount)
		case "egressbytes":
			o.EgressBytes, err = parseCount(v, MaxOutputsTotal)
		case "egressgib":
			o.EgressBytes, err = parseGiB(v)
		case "unit":
			err = checkUnit(v)
			o.Unit = v
		default:
			return Outputs{}, fmt.Errorf("unknown key %s (want accepted, rejected, unit, egressBytes or egressGiB)", quoteWord(k))
		}
		if err != nil {
			return Outputs{}, fmt.Errorf("%s: %w", k, err)
		}
	}
	return o, nil
}

// parseCount parses a whole number from 0 to max, digits only.
func parseCount(v string, max int64) (int64, error) {
	if strings.HasPrefix(v, "-") && len(v) > 1 && isDigits(v[1:]) {
		return 0, fmt.Errorf("%s is negative", quoteWord(v))
	}
	if !isDigits(v) {
		return 0, fmt.Errorf("%s: want a whole number", quoteWord(v))
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n > max {
		return 0, fmt.Errorf("%s: want at most %d", quoteWord(v), max)
	}
	return n, nil
}

// parseGiB parses a decimal number of GiB ("1.5", "2", ".25") into bytes,
// exactly: digits past the ninth decimal are ignored and the part of a
// byte left is dropped.
func parseGiB(v string) (int64, error) {
	whole, frac, _ := strings.Cut(v, ".")
	if strings.HasPrefix(v, "-") {
		return 0, fmt.Errorf("%s is negative", quoteWord(v))
	}
	if whole == "" && frac == "" || whole != "" && !isDigits(whole) || frac != "" && !isDigits(frac) {
		return 0, fmt.Errorf("%s: want a decimal number of GiB", quoteWord(v))
	}
	const gib = 1 << 30
	const maxWhole = MaxOutputsTotal / gib
	var w int64
	if whole != "" {
		n, err := strconv.ParseInt(whole, 10, 64)
		if err != nil || n > maxWhole {
			return 0, fmt.Errorf("%s: want at most %d GiB", quoteWord(v), maxWhole)
		}
		w = n
	}
	if len(frac) > 9 {
		frac = frac[:9]
	}
	var f int64 // frac as nanoGiB
	if frac != "" {
		n, _ := strconv.ParseInt(frac, 10, 64) // at most 9 digits
		for i := len(frac); i < 9; i++ {
			n *= 10
		}
		f = n
	}
	b := w*gib + f*gib/1_000_000_000 // f*gib < 1e9 * 2^30 < 2^63
	if b > MaxOutputsTotal {
		return 0, fmt.Errorf("%s: want at most %d bytes", quoteWord(v), int64(MaxOutputsTotal))
	}
	return b, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// checkUnit accepts a word of 1 to MaxOutputsUnit bytes of ASCII letters,
// digits and "-_.:/".
func checkUnit(v string) error {
	if v == "" || len(v) > MaxOutputsUnit {
		return fmt.Errorf("want a word of 1 to %d characters", MaxOutputsUnit)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && strings.IndexByte("-_.:/", c) >= 0: // not first: a spreadsheet would read "-A1" as a formula
		default:
			return fmt.Errorf("%s: want a word of letters, digits and -_.:/, starting with a letter or digit", quoteWord(v))
		}
	}
	return nil
}

// quoteLine quotes s for a note: at most max bytes of it (cut at a rune's
// start, the cut marked with "..."), each byte that is not printable
// (invalid UTF-8 included) shown as '?', so a note is never longer than
// the line's max bytes and its quotes.
func quoteLine(s string, max int) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if i+size > max {
			b.WriteString(`"...`)
			return b.String()
		}
		if r == utf8.RuneError && size == 1 || !unicode.IsPrint(r) {
			b.WriteByte('?')
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
	return b.String()
}

// quoteWord quotes a key or value in a note, bounded to 40 bytes.
func quoteWord(s string) string { return quoteLine(s, 40) }
