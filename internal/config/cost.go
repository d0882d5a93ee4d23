package config

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/gpufleet/gpufleet/api"
)

// Cost configures the cost ledger: the currency every price and budget is
// in, the price versions known from the file (admins add more through the
// API; a file version is never stored, so editing the file changes it),
// and the pool of this machine's node.
type Cost struct {
	// Currency is an ISO 4217 code, USD by default.
	Currency string `json:"currency,omitempty"`
	// Prices are price versions (api.Price); EffectiveFrom absent means
	// since this server's store was made (a reserved commitment must give
	// its start).
	Prices []api.Price `json:"prices,omitempty"`
}

// DefaultPool is the pool of the local machine's node when none is
// configured.
const DefaultPool = "local"

// isoCurrencies is the set of active ISO 4217 codes a server may bill in.
var isoCurrencies = strings.Fields(`AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN BWP BYN BZD
CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF
IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR
MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SOS
SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD UYU UZS VES VND VUV WST XAF XCD XOF XPF YER ZAR ZMW ZWG`)

var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// ValidCurrency reports whether code is an ISO 4217 currency.
func ValidCurrency(code string) bool {
	if !currencyCode.MatchString(code) {
		return false
	}
	for _, c := range isoCurrencies {
		if c == code {
			return true
		}
	}
	return false
}

func (c Cost) validate() []error {
	var errs []error
	if c.Currency != "" && !ValidCurrency(c.Currency) {
		errs = append(errs, fmt.Errorf("cost.currency %q: want an ISO 4217 code such as USD or EUR", c.Currency))
	}
	seen := map[string]bool{}
	for i, p := range c.Prices {
		for _, fe := range p.Validate() {
			errs = append(errs, fmt.Errorf("cost.prices[%d].%s: %s", i, fe.Field, fe.Problem))
		}
		if p.Kind == api.PriceReserved && p.EffectiveFrom.IsZero() {
			errs = append(errs, fmt.Errorf("cost.prices[%d].effectiveFrom: a reserved commitment starts at a time: give its start", i))
		}
		k := p.Pool + "@" + p.EffectiveFrom.String()
		if seen[k] {
			errs = append(errs, fmt.Errorf("cost.prices[%d].effectiveFrom: pool %s has two versions from the same time", i, p.Pool))
		}
		seen[k] = true
	}
	return errs
}
