package cost

import "strings"

// currencies are the active ISO 4217 codes a server may bill in, each
// with its minor units (the digits after the decimal point a price list
// shows: 2 for USD and EUR, 0 for JPY, 3 for KWD).
var currencies = func() map[string]int {
	m := map[string]int{}
	for _, c := range strings.Fields(`AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BRL BSD BTN BWP BYN BZD
CAD CDF CHF CNY COP CRC CUP CVE CZK DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GTQ GYD HKD HNL HTG HUF
IDR ILS INR IRR JMD KES KGS KHR KPW KYD KZT LAK LBP LKR LRD LSL MAD MDL MGA MKD MMK MNT MOP MRU MUR
MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD PAB PEN PGK PHP PKR PLN QAR RON RSD RUB SAR SBD SCR SDG SEK SGD SHP SLE SOS
SRD SSP STN SVC SYP SZL THB TJS TMT TOP TRY TTD TWD TZS UAH USD UYU UZS VES WST XCD YER ZAR ZMW ZWG`) {
		m[c] = 2
	}
	for _, c := range strings.Fields(`BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX VND VUV XAF XOF XPF`) {
		m[c] = 0
	}
	for _, c := range strings.Fields(`BHD IQD JOD KWD LYD OMR TND`) {
		m[c] = 3
	}
	return m
}()

// ValidCurrency reports whether code is an active ISO 4217 currency.
func ValidCurrency(code string) bool {
	_, ok := currencies[code]
	return ok
}

// MinorUnits is how many decimals a currency's minor unit has (2 for USD,
// 0 for JPY, 3 for KWD); 2 for a code it does not know.
func MinorUnits(code string) int {
	if n, ok := currencies[code]; ok {
		return n
	}
	return 2
}
