// Package dashboard serves a live web page of a running job, and the JSON
// API under /api/ that feeds it (docs/dashboard.md documents both).
//
// It shows the job graph with records in and out per second and
// back-pressure per operator; the watermark of every operator subtask and
// its lag behind wall-clock time; the catch-up of every Kafka partition
// against the end offset taken at start; the watermarks agent and async
// operators hold back and the keys holding them; the checkpoint history;
// agent actions, latency and calls per model and tool; dead letters and
// late records with the latest reasons.
//
// Guarantees:
//
//	D1. Nothing is opened unless asked: Start listens on the one address
//	    it is given; an address without a host (":8081") listens on the
//	    loopback interface only. ParseAddr checks an address before any
//	    work (what a command line does with --ui-addr).
//	D2. The job pays nothing per record: the dashboard reads the counters
//	    and gauges the job keeps anyway (runtime.Metrics, the same values
//	    package metrics exposes to Prometheus, so the page and
//	    --metrics-addr agree), Job.Topology, Job.Checkpoints and
//	    agent.Status, once per Options.Interval, on a goroutine of its own.
//	D3. Every figure the page shows comes from one frame (a numbered
//	    sample, Frame.Seq), and the page marks which; /api/frame?seq=N
//	    returns that frame while it is among the last Options.History, so
//	    what the page shows can be checked against the API exactly.
//	D4. The page's assets are embedded in the binary (package embed): no
//	    CDN, no network access besides the API of the server that served it.
//	D5. Close stops the sampler and the HTTP server and waits for both.
package dashboard
