// Package benchhook gives the agent's benchmarks (package agent/agentbench
// and the weir agent experiment) the blocking variant of the agent
// operator, which is not public API: actions run synchronously on the
// subtask goroutine, one at a time, the naive design kept as the baseline
// the asynchronous operator is compared with.
package benchhook

// SetBlocking makes the *agent.Options it is given select the blocking
// variant. Package agent sets it when it is initialised; it panics when
// given anything but an *agent.Options.
var SetBlocking func(opts any)
