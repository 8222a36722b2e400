// Package cputime reads the CPU time the process has used, user and
// system: on a loaded machine it shows what an operation costs better than
// the wall clock does. The benchmarks, experiments and tests of several
// packages read it here (internal/testenv.CPUTime for tests).
//
// It reads getrusage(RUSAGE_SELF): the CPU of every goroutine of the
// process, the garbage collector's included, and of no other process (an
// embedded broker or server in the process counts; a child process or a
// database server does not).
package cputime
