package quantity

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Milli is a decimal quantity held as thousandths: 1000 is one GPU (or one
// CPU), 250 is a quarter. On the wire it is a plain JSON number such as 0.25
// or 2; a quoted string ("0.25") is accepted too. More than three decimals is
// an error, never a silent rounding.
type Milli int64

// ParseMilli parses a decimal such as "2", "0.25" or ".5" into thousandths.
func ParseMilli(s string) (Milli, error) {
	v, err := milliDecimal.parse(s)
	return Milli(v), err
}

// milliDecimal is how a Milli is written: three decimals, a whole part
// below 2^40.
var milliDecimal = decimal{digits: 3, word: "three", what: "quantity", maxWhole: 1<<40 - 1}

// String renders the quantity as the shortest decimal: 0.25, 2, 1.5.
func (m Milli) String() string { return milliDecimal.format(int64(m)) }

// MarshalJSON writes the quantity as a JSON number.
func (m Milli) MarshalJSON() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalJSON reads a JSON number or a quoted decimal.
func (m *Milli) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		b = []byte(s)
	}
	if bytes.ContainsAny(b, "eE") {
		return fmt.Errorf("%q: exponents are not accepted", b)
	}
	v, err := ParseMilli(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}
