// Package pipeline runs declarative pipelines: a YAML file names a source,
// a list of steps and a sink (plus named outputs for late records, dead
// letters, sort violations and branches), and the package builds the job
// on weir's Go API and runs it. `weir run FILE` and `weir validate FILE`
// are its commands; docs/pipelines.md is the reference of every key, with
// a worked example. Each section of the file is one table of fields in the
// parser (a key, what it accepts, whether required, its default, a line of
// description, and its decoder); the page's key reference is generated from
// those tables (reference.go, `go generate ./pipeline/`) and checked
// against them by TestReferenceUpToDate.
//
// The file, in short:
//
//	name: orders-by-customer
//	job:      {parallelism, maxParallelism, autoWatermarkInterval,
//	           checkpoint: {interval, dir, mode}, stateBackend, stateDir,
//	           stateCache, restoreFrom, metricsAddr, approvals: {httpAddr}}
//	kafka:    {brokers: [host:port], tls, sasl} or {embedded: DIR | {dir, topics, produce}}
//	          (tls: true | {caFile, certFile, keyFile, serverName, insecureSkipVerify};
//	           sasl: {mechanism, username, password | passwordFile, token | tokenFile |
//	           tokenURL + clientID + clientSecret | clientSecretFile, scope, extensions,
//	           accessKey, secretKey, sessionToken}; parse_security.go)
//	source:   {kafka: {topics | topicPattern, start, group, readCommitted, bounded, metadata}
//	           | file: {paths, ordered} | generate: {count, fields},
//	           timestamp: FIELD.PATH, watermark: {outOfOrderness, idleness, emit},
//	           deadLetters: OUTPUT}
//	steps:    - filter: EXPR             (filter, map, agent: deadLetters: OUTPUT)
//	          - map: {set: {FIELD: EXPR}, drop: [FIELD]}
//	          - keyBy: FIELD.PATH        (then sort, window or agent)
//	          - sort: {violations: OUTPUT, tiebreak: [EXPR, EXPR]}
//	          - window: {tumbling: D | sliding: {size, slide} | session: {gap},
//	                     allowedLateness, late: OUTPUT,
//	                     aggregate: {FIELD: count | sum(F) | min(F) | max(F) | avg(F) | first(F) | last(F)}}
//	          - agent: {model: {offline: {seed, latency}} | {url, name, apiKeyEnv},
//	                    system, prompt: TEMPLATE, tools: [{http: {...}} | {mcp: {...}},
//	                    approval: {deadline, onTimeout}], maxSteps, output,
//	                    store: {wal: DIR} | {kafka: {topic}}, pricing: {MODEL: {input, output}},
//	                    approvals: {topic, requests}}       (approval.go)
//	          - tee: OUTPUT
//	sink:     {stdout: {}} | {file: {dir | path}} | {kafka: {topic, delivery, key}}
//	outputs:  {NAME: SINK | {steps: [...], sink: SINK}}
//
// Records are JSON objects (Record, a map decoded with encoding/json:
// numbers are float64). Expressions are expr-lang/expr programs over a
// record's fields, compiled once when the file is parsed; string values
// (not expressions) expand ${VAR} and ${VAR:-default}; relative paths are
// relative to the file.
//
// Guarantees:
//
//	P1. Parse never panics and never does I/O; every problem it finds is an
//	    Error naming file:line:column and what is accepted, and it reports
//	    every problem of the file (up to 50) in one Errors, sorted by
//	    position (FuzzParse checks the first half, TestBadPipelines the
//	    messages). Build reports a Kafka topic the cluster lacks, or an
//	    input file that is missing, the same way, before the job starts.
//	P2. A file Parse accepts builds (Build fails only on what needs the
//	    outside world: the broker, MCP servers, files).
//	P3. The job is a weir job like any other: its guarantees are those of
//	    the operators the steps map to (event-time windows, the sort's
//	    order per key, the agent's exactly-once actions with a store,
//	    checkpoints and savepoints of all of them). A Kafka sink with
//	    delivery exactly-once and a file sink with dir are exactly once
//	    (published with checkpoints and at the end of bounded input); a
//	    file sink with path is exactly once in its files after the job
//	    resumes or ends (each cut back to its checkpointed length on
//	    resume), though a reader sees lines before their checkpoint; a
//	    Kafka sink at-least-once and stdout are at least once.
//	P4. Compiled expressions run on one VM per operator subtask (or one
//	    from a pool where a function is shared by subtasks): a filter
//	    allocates nothing per record; a map allocates the new record.
//	P5. Operator names are stable: the given name, or the step's kind
//	    (filter, map, sort, window, agent; sinks "sink" and
//	    "output-NAME"), numbered from the second of a kind on; they are
//	    also the operators' UIDs, so a savepoint restores into the same
//	    file, and into an edited file whose named steps kept their names.
//	P6. No operator modifies a record it received: a record emitted on two
//	    outputs (a tee, a sort's violations) is shared safely.
//	P7. One bad record never stops the job: a record a filter or map
//	    expression fails on (or a map sets to NaN or an infinity), or an
//	    agent's prompt does not render for, is a dead letter of the step
//	    ({step, at, reason, value}) sent to the step's deadLetters output,
//	    by default the source's; with neither it is dropped. Each is
//	    counted (deadLetters, deadLettersDropped), the first reasons
//	    logged (deadletter.go). The good path allocates nothing more.
//	    With continueOnError, an input an agent step's action fails on
//	    is a dead letter of the step too (agent.Options.FailedInputs),
//	    with its action, key, input number and run id. A record a Kafka
//	    sink cannot write in its format or keyFormat is a dead letter of
//	    the sink ({sink, topic, reason, value}) sent to the source's
//	    deadLetters output, in local and group mode (kafkasink.go); one
//	    a Postgres or Parquet sink cannot hold is rejected before it joins
//	    a transaction and sent to the sink's deadLetters, else the
//	    source's (sinkdead.go). The
//	    summary counts every dead letter and every record dropped for
//	    want of an output (Summary.Dropped; `weir run` then exits with
//	    status 3).
//	P8. Secrets of kafka.sasl come only from ${ENV} or files; a literal
//	    one is refused, and no error, log line, summary or Describe shows
//	    a secret's value (kafkasec's S3). Every Kafka client of Run and
//	    RunCluster uses kafka.tls and kafka.sasl.
//
// Build returns a Job whose Start gives the running runtime.Job (for
// savepoints, cancellation, metrics and dashboards); Run is Build, Start,
// Wait and a summary, which is what `weir run` does.
//
// Group mode: RunCluster runs a file as one clustered job (package
// cluster) over every process started with the same file and
// ClusterOptions.Group (`weir run FILE --group G`), split at its keyBy:
// the source and the steps before it in one source task per partition of
// the source topic, the keyed step and what follows in the keyed tasks,
// with records crossing the exchange topic as JSON. CheckCluster says,
// before any work and in the same Errors, what group mode cannot run (one
// Kafka topic, one keyBy with only filter, map and tee before it, an
// exactly-once Kafka sink, outputs to Kafka or stdout, a checkpoint
// location, no embedded broker). Its guarantee is the cluster's C1: the
// committed output equals Run's over the same input, provided no record
// is late in either (P3 then holds per task).
package pipeline
