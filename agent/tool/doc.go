// Package tool gives agents tools: Go functions with JSON-Schema
// parameters (Func), hand-written ones (Raw), and the tools of MCP servers
// over stdio or streamable HTTP (ConnectMCP, MCPStdio, MCPHTTP).
//
// # Guarantees
//
//  1. Specs. Every tool has a non-empty name and a JSON Schema (an object
//     schema) of its arguments that models see; Func infers it from the
//     argument type, MCP tools take the server's.
//  2. Validation. Func validates arguments against the schema before the
//     function runs; invalid arguments, unknown tools (Set.Call) and errors
//     returned by a Func come back as a Result with IsError and a message
//     saying what is wrong, so a model can correct itself. An error return
//     from Call means the call itself failed (an MCP server went away).
//  3. Concurrency. Tools are safe for concurrent use: the agent operator
//     calls them from the actions of many keys at once. An MCP connection
//     multiplexes concurrent calls over one session.
//  4. Cancellation. Calls honour their context: MCP calls send a
//     cancellation to the server when it is done.
//  5. No leaks. Closing an MCP client ends its session and, for stdio,
//     waits for the server process to exit.
//  6. Idempotency. A call whose context carries an idempotency key
//     (WithIdempotencyKey; the agent operator sets one on every tool call
//     it records) hands it on: Go tools read it with IdempotencyKey, MCP
//     tools send it in the request's _meta under MCPIdempotencyMetaKey
//     ("weir/idempotencyKey").
package tool
