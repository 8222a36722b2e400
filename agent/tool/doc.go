// Package tool gives agents tools: Go functions with JSON-Schema
// parameters (Func), hand-written ones (Raw), and the tools of MCP servers
// over stdio or streamable HTTP (ConnectMCP, MCPStdio, MCPHTTP).
//
// # Guarantees
//
//	I1. Specs. Every tool has a non-empty name and a JSON Schema (an object
//	    schema) of its arguments that models see; Func infers it from the
//	    argument type, MCP tools take the server's.
//	I2. Validation. Func validates arguments against the schema before the
//	    function runs; invalid arguments, unknown tools (Set.Call) and errors
//	    returned by a Func come back as a Result with IsError and a message
//	    saying what is wrong, so a model can correct itself. An error return
//	    from Call means the call itself failed (an MCP server went away).
//	I3. Concurrency. Tools are safe for concurrent use: the agent operator
//	    calls them from the actions of many keys at once. An MCP connection
//	    multiplexes concurrent calls over one session.
//	I4. Cancellation. Calls honour their context: MCP calls send a
//	    cancellation to the server when it is done.
//	I5. No leaks. Closing an MCP client ends its session and, for stdio,
//	    waits for the server process to exit.
//	I6. Idempotency. A call whose context carries an idempotency key
//	    (WithIdempotencyKey; the agent operator sets one on every tool call
//	    it records) hands it on: Go tools read it with IdempotencyKey, MCP
//	    tools send it in the request's _meta under MCPIdempotencyMetaKey
//	    ("weir/idempotencyKey").
//	I7. Retries. A request to an MCP server that fails transiently
//	    (connection errors, HTTP 5xx and 429, attempts cut short by
//	    MCPRetry.Timeout) is retried as MCPRetry says, with exponential
//	    back-off and jitter (package internal/retry), a retried tool call
//	    keeping its idempotency key (I6). The waits and Timeout are
//	    measured on MCPRetry.Clock, else on the clock the context carries
//	    (clock.NewContext: the agent operator's tool calls carry the job's),
//	    else on the system clock. Errors the server returns are not
//	    retried, nor is anything once the caller's context is done (I4).
package tool
