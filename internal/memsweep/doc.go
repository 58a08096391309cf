// Package memsweep plans with a scheduler at a ladder of per-device
// memory caps and simulates each plan: the fastest plan at each cap, and
// the fastest found at any cap up to it. A search is not monotone in the
// cap (a pipeline search's estimate ranks its candidates and a cap moves
// the dynamic programs' answers), so a sweep can find a faster plan than
// the search at the devices' own memory; gnnkit plan --mem-sweep prints
// one, and the GraphPipe benchmark's -sweep weighs every scheduler's
// fastest at any cap.
package memsweep
