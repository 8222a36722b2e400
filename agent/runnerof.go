package agent

import "context"

type runnerCtxKey struct{}

// withRunner returns ctx carrying c, for the tool calls c makes.
func withRunner(ctx context.Context, c *RunnerContext) context.Context {
	return context.WithValue(ctx, runnerCtxKey{}, c)
}

// RunnerOf returns the RunnerContext of the action run that made the tool
// call whose context is ctx: RunnerContext.CallTool (and so every tool
// call of ReAct) passes it on, so that a tool can reach the key and memory
// of the run it serves (package memory's long-term-memory tool does). ok
// is false for a context of anything else (a call through Tools().Call, a
// tool called outside an agent). The tool must use it only for the
// duration of the call, on the call's goroutine, as the action would.
func RunnerOf(ctx context.Context) (c *RunnerContext, ok bool) {
	c, ok = ctx.Value(runnerCtxKey{}).(*RunnerContext)
	return c, ok
}
