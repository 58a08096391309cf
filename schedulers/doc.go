// Package schedulers is the home of gnnkit's built-in schedulers, one
// subpackage each: sequential (the reference), and later cherry, graphpipe
// and blad. Each registers itself with core.RegisterScheduler in init;
// import a subpackage for its side effect to make it available by name,
// or import schedulers/all for every one.
package schedulers
