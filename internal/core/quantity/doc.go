// Package quantity holds gpufleet's exact numbers and how they are written:
// amounts of money in micro-units (Money), decimal quantities in
// thousandths (Milli: GPUs, CPUs), memory and storage sizes in MiB and
// bytes (every unit a power of 1024), and periods in hours, days, months
// of HoursPerMonth and years. Each is an integer with one parser and one
// formatter: more decimals than a type keeps is an error, never a
// rounding. The JSON form of Money and Milli is their own, so the wire
// types of package api use these types as they are.
//
// quantity is pure: no I/O, no clock, nothing logged; it imports only the
// standard library.
package quantity
