// Package fairshare divides GPU capacity among teams: guarantees first,
// then what is left by weighted max-min fairness (water-filling). The
// scheduler orders queues with it, the simulator reports fairness with it,
// and "why is my share X" prints its Explain lines.
//
// It is pure maths: no I/O, no clock, no goroutines, no logging, and it
// imports only the standard library. Quantities are whole milli-GPU in
// int64 (1000 = one GPU); no floats are used anywhere, so results are
// exact and the same on every machine. Products that could overflow are
// taken in 128 bits (math/bits), and in math/big in the one case where the
// sum of the weights itself no longer fits in 64 bits.
//
// It does not import core: teams arrive as plain names and int64
// milli-GPU, so that the simulator and offline tools can call it without
// building core values, and so the maths can be read and tested on its
// own.
//
// Decisions worth knowing before calling it:
//
//   - Team names must be unique within one call; a duplicate is a
//     programming error and panics.
//   - Negative capacity, guarantees and demands count as 0. A negative
//     Limit means unlimited; a Limit of 0 means the team gets nothing.
//   - A Weight of 0 or less counts as 1: every team may borrow idle
//     capacity. To stop a team borrowing, set its Limit to its Guaranteed.
//   - When guarantees do not fit in capacity, each team gets the same
//     fraction of its guarantee, never more than it wants (a water-fill
//     weighted by Guaranteed). Nothing is then left to borrow.
//   - Rounding happens once per water-fill: every team gets the floor of
//     its exact share, and the milli-GPU left over go one at a time to the
//     largest fractional remainders, ties by name. So each share is within
//     one milli-GPU of the exact fair share, never above a team's cap, and
//     the result does not depend on the order of the input.
package fairshare
