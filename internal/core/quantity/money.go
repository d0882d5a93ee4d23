package quantity

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// Money is an amount of the server's currency held exactly as an integer
// count of micro-units (millionths): 1_000_000 is one dollar (or euro, ...).
// On the wire it is a plain JSON number with up to six decimals, such as
// 576000 or 0.000278; a quoted string is accepted too. More than six
// decimals is an error, never a silent rounding. Arithmetic on Money is
// integer arithmetic; the one rounding, where a cost is divided, is done by
// internal/cost and documented there.
type Money int64

// MoneyUnit is one unit of the currency.
const MoneyUnit Money = 1_000_000

// MaxMoney bounds any price or budget (a billion units), so that sums over
// many intervals stay far from overflow.
const MaxMoney Money = 1_000_000_000 * MoneyUnit

// ParseMoney parses a plain decimal such as "8", "8.25", ".5" or "576000",
// with an optional sign (no exponent, no currency symbol).
func ParseMoney(s string) (Money, error) {
	v, err := moneyDecimal.parse(s)
	return Money(v), err
}

// moneyDecimal is how Money is written: six decimals, at most MaxMoney.
var moneyDecimal = decimal{digits: 6, word: "six", what: "amount", maxWhole: uint64(MaxMoney / MoneyUnit)}

// String renders the amount as the shortest exact decimal: 576000, 0.5,
// 0.000278.
func (m Money) String() string { return moneyDecimal.format(int64(m)) }

// Fixed renders the amount with exactly two decimals when it has no more,
// else all of its decimals: 576000.00, 12.50, 0.000278. For tables.
func (m Money) Fixed() string {
	s := m.String()
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) <= 2 {
		return whole + "." + frac + strings.Repeat("0", 2-len(frac))
	}
	return s
}

// MarshalJSON writes the amount as a JSON number.
func (m Money) MarshalJSON() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalJSON reads a JSON number or a quoted decimal.
func (m *Money) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	var s string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	} else {
		s = string(b)
	}
	v, err := ParseMoney(s)
	if err != nil || v > MaxMoney || v < -MaxMoney {
		// A type error, so that the decoder names the field.
		return &json.UnmarshalTypeError{Value: strconv.Quote(s), Type: reflect.TypeFor[Money]()}
	}
	*m = v
	return nil
}
