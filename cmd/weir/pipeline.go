package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/dashboard"
	"github.com/weirproject/weir/internal/buildinfo"
	"github.com/weirproject/weir/internal/progress"
	"github.com/weirproject/weir/internal/shutdown"
	"github.com/weirproject/weir/pipeline"
	"github.com/weirproject/weir/runtime"
)

// pipelineUsage turns the problems of a pipeline file into a usage error:
// one line per problem, each naming file:line:column (exit status 2).
func pipelineUsage(c *cobra.Command, err error) error {
	var es pipeline.Errors
	if errors.As(err, &es) {
		lines := make([]string, len(es))
		for i, e := range es {
			lines[i] = c.CommandPath() + ": " + e.Error()
		}
		return &usageError{msg: strings.Join(lines, "\n")}
	}
	return usagef(c, "%v", err)
}

func validateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate PIPELINE.yaml...",
		Short: "Check pipeline files without running them (exit 2 and file:line:column for each problem)",
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef(c, "no file given: want one or more pipeline files")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			var all pipeline.Errors
			for _, path := range args {
				s, err := pipeline.ParseFile(path)
				var es pipeline.Errors
				switch {
				case errors.As(err, &es):
					all = append(all, es...)
				case err != nil:
					return usagef(c, "%v", err)
				default:
					// The checks weir run makes before starting (no broker).
					if err := pipeline.CheckStart(s, pipeline.Options{}); errors.As(err, &es) {
						all = append(all, es...)
						continue
					} else if err != nil {
						return usagef(c, "%v", err)
					}
					fmt.Fprintf(c.OutOrStdout(), "%s: ok (%s)\n", path, pipeline.Describe(s))
				}
			}
			if len(all) > 0 {
				return pipelineUsage(c, all)
			}
			return nil
		},
	}
}

func runCmd() *cobra.Command {
	var (
		spec         *pipeline.Spec
		opts         pipeline.Options
		asJSON       bool
		uiAddr       string
		logLevel     string
		savepointDir string
		group        pipeline.ClusterOptions
		trace        *traceFlags
	)
	c := &cobra.Command{
		Use:   "run PIPELINE.yaml",
		Short: "Run a pipeline file (see docs/pipelines.md); records of stdout sinks on stdout, progress and summary on stderr",
		Args:  exactArgs(1, "one pipeline file"),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			if err := checkGroupFlags(cmd, &group); err != nil {
				return err
			}
			k := &checks{c: cmd}
			if opts.HealthAddr != "" {
				k.hostPort("health-addr", opts.HealthAddr)
			}
			if opts.MetricsAddr != "" {
				k.hostPort("metrics-addr", opts.MetricsAddr)
			}
			if opts.ApprovalsAddr != "" {
				k.hostPort("approvals-addr", opts.ApprovalsAddr)
				if group.Group != "" {
					k.fail("--approvals-addr with --group: approvals do not run in a clustered job yet")
				}
			}
			k.intRange("parallelism", int64(opts.Parallelism), 0, 32768)
			for _, l := range []struct{ flag, loc string }{{"savepoint-dir", savepointDir}, {"restore", opts.RestoreFrom}} {
				if l.loc == "" {
					continue
				}
				if err := checkpoint.CheckLocation(l.loc); err != nil {
					return usagef(cmd, "--%s: %v", l.flag, err)
				}
			}
			if dir, local := checkpoint.LocalPath(savepointDir); local && savepointDir != "" {
				if es, err := os.ReadDir(dir); err == nil && len(es) > 0 {
					return usagef(cmd, "--savepoint-dir %q: holds files already; want a new or empty directory for the savepoint", savepointDir)
				}
			}
			if cmd.Flags().Changed("restart") {
				if !slices.Contains(pipeline.RestartStrategies, opts.Restart.Strategy) {
					return usagef(cmd, "--restart %q: want one of %s", opts.Restart.Strategy, strings.Join(pipeline.RestartStrategies, ", "))
				}
			}
			k.intRange("restart-attempts", int64(opts.Restart.Attempts), 0, 1000000)
			k.duration("restart-delay", opts.Restart.Delay, 0)
			k.duration("restart-max-delay", opts.Restart.MaxDelay, 0)
			if k.err != nil {
				return k.err
			}
			if opts.Fresh && opts.RestoreFrom != "" {
				return usagef(cmd, "--fresh and --restore %q: give one of them (--fresh starts without state, --restore from a snapshot)", opts.RestoreFrom)
			}
			if uiAddr != "" {
				if _, err := dashboard.ParseAddr(uiAddr); err != nil {
					return usagef(cmd, "--ui-addr: %v", err)
				}
			}
			if cmd.Flags().Changed("log-level") {
				if _, _, err := parseLogLevel(logLevel); err != nil {
					return usagef(cmd, "%v", err)
				}
			}
			if k.err != nil {
				return k.err
			}
			s, err := pipeline.ParseFile(args[0])
			if err != nil {
				return pipelineUsage(cmd, err)
			}
			if err := checkRestartFlags(cmd, s, opts.Restart); err != nil {
				return err
			}
			if err := trace.apply(cmd, s); err != nil {
				return err
			}
			if group.Group != "" {
				group.MetricsAddr, group.HealthAddr, group.RestoreFrom = opts.MetricsAddr, opts.HealthAddr, opts.RestoreFrom
				if err := pipeline.CheckCluster(s, group); err != nil {
					return pipelineUsage(cmd, err)
				}
			} else if err := pipeline.CheckStart(s, opts); err != nil { // as weir validate
				return pipelineUsage(cmd, err)
			}
			spec = s
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if group.Group != "" {
				return runGroup(ctx, cmd, spec, group, asJSON, uiAddr, logLevel)
			}
			// The first SIGINT or SIGTERM stops the job with a savepoint
			// and exits 0; a second one aborts with 130 (as weir demo).
			stop := shutdown.Notify(shutdown.Options{Log: cmd.ErrOrStderr()})
			defer stop.Close()
			rep := progress.New(progress.Options{Out: cmd.ErrOrStderr()})
			defer rep.Close()
			log := rep.Wrap(cmd.ErrOrStderr())
			var (
				ui      *dashboard.Server
				uiErr   error
				stopped = make(chan struct{}) // closed when the stop goroutine is done
				resume  string
				started bool // OnStart ran, so the stop goroutine runs
			)
			opts.Stdout = cmd.OutOrStdout()
			if logLevel != "" {
				opts.Logger = newLogger(log, logLevel)
			}
			opts.OnStart = func(_ *pipeline.Job, job *runtime.Job) {
				started = true
				rep.Watch(job.Metrics().Snapshot)
				if uiAddr != "" {
					if ui, uiErr = dashboard.Start(uiAddr, job, dashboard.Options{}); uiErr != nil {
						job.Cancel()
					} else {
						fmt.Fprintf(log, "weir run: dashboard on %s\n", ui.URL())
					}
				}
				go func() {
					defer close(stopped)
					select {
					case <-stop.Requested():
					case <-job.Done():
						return
					}
					dir := stopSavepointDir(savepointDir, spec.Job.CheckpointDir, time.Now())
					end := rep.Phase("taking a savepoint into " + dir)
					id, err := shutdown.StopWithSavepoint(ctx, job, dir)
					end()
					switch {
					case errors.Is(err, shutdown.ErrFinished):
					case err != nil:
						fmt.Fprintf(log, "weir run: %v\n", err)
					default:
						resume = shutdown.ResumeLine(id, dir, resumeCommand(cmd, dir))
					}
				}()
			}
			s, err := pipeline.Run(ctx, spec, opts, log)
			if ui != nil {
				defer ui.Close()
			}
			if started {
				<-stopped
			}
			if uiErr != nil {
				return fmt.Errorf("weir run: %w", uiErr)
			}
			var es pipeline.Errors
			if errors.As(err, &es) { // an unknown topic, found when the job was built
				return pipelineUsage(cmd, err)
			}
			if err != nil {
				return err
			}
			if resume != "" {
				fmt.Fprint(log, resume)
			}
			return finishRun(cmd, s, asJSON)
		},
	}
	f := c.Flags()
	f.StringVar(&opts.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address (overrides job.metricsAddr)")
	f.StringVar(&opts.ApprovalsAddr, "approvals-addr", "", "serve the HTTP endpoint taking answers to the agent steps' approvals on this address (overrides job.approvals.httpAddr; no host: loopback)")
	f.StringVar(&opts.HealthAddr, "health-addr", "", "serve /healthz and /readyz on this address (overrides job.healthAddr; also served beside /metrics)")
	f.StringVar(&opts.RestoreFrom, "restore", "", "start from this savepoint or checkpoint directory (overrides job.restoreFrom)")
	f.BoolVar(&opts.Fresh, "fresh", false, "start without state although job.checkpoint.dir holds checkpoints (they are ignored, new ones numbered after them; default: resume from the newest)")
	f.BoolVar(&opts.AllowNonRestoredState, "allow-non-restored-state", false, "restore a snapshot holding state of operators the pipeline no longer has, dropping that state (overrides job.allowNonRestoredState)")
	f.StringVar(&opts.Restart.Strategy, "restart", "", "restart the job from its newest checkpoint after a step fails: none, fixed-delay or exponential-backoff (overrides job.restart.strategy; default none)")
	f.IntVar(&opts.Restart.Attempts, "restart-attempts", 0, "with a restart strategy: restarts allowed (in a row, for back-off) before a failure ends the job (overrides job.restart.attempts; 0: the file's, else 3)")
	f.DurationVar(&opts.Restart.Delay, "restart-delay", 0, "with a restart strategy: the pause before a restart, the first one's with back-off (overrides job.restart.delay; 0: the file's, else 1s)")
	f.DurationVar(&opts.Restart.MaxDelay, "restart-max-delay", 0, "with exponential-backoff: the longest pause (overrides job.restart.maxDelay; 0: the file's, else 1m)")
	f.IntVar(&opts.Parallelism, "parallelism", 0, "parallelism (overrides job.parallelism; 0: the file's)")
	f.BoolVar(&asJSON, "json", false, "print the summary as JSON on stdout at the end")
	trace = addTraceFlags(f)
	f.StringVar(&logLevel, "log-level", "", "the job's logs on stderr from this level: "+logLevels+" (default: info; warn with --group)")
	f.StringVar(&uiAddr, "ui-addr", "", "serve the live dashboard on this address while the job runs (such as 127.0.0.1:8088; no host: loopback)")
	f.StringVar(&savepointDir, "savepoint-dir", "", "where a stop by SIGINT or SIGTERM writes its savepoint (default: a new directory under job.checkpoint.dir's savepoints/, or $TMPDIR/weir-savepoints without one)")
	f.StringVar(&group.Group, "group", "", "run the pipeline as one job over every process started with this group (Kafka consumer group; see docs/scale-out.md)")
	f.IntVar(&group.KeyedTasks, "keyed-tasks", 4, "with --group: keyed tasks, the most processes that share the keyed work (the same in every process)")
	f.StringVar(&group.CheckpointBase, "checkpoint-dir", "", "with --group: where every task checkpoints, s3://, gs://, azblob:// or a shared directory (overrides job.checkpoint.dir)")
	f.StringVar(&group.Member, "member", "", "with --group: this process's name in the group (default HOST-PID)")
	f.DurationVar(&group.SessionTimeout, "session-timeout", 3*time.Second, "with --group: how long after a process dies its tasks move (the brokers must allow it: group.min.session.timeout.ms)")
	f.BoolVar(&group.StaticMembership, "static-membership", false, "with --group: a static member (Kafka's group.instance.id = --member): restarted within --session-timeout, this process gets its tasks back and no other's move; stopped, its tasks wait for it that long (default true with --member, false without)")
	f.IntVar(&group.ExchangeVersion, "exchange-version", 0, "with --group: the batch version this process's source tasks write to the exchange topic: 0 the newest (2, binary), 1 JSON, which every earlier build reads; give 1 to every process while a group is upgraded process by process from a build before version 2, then restart them without it")
	f.BoolVar(&group.LeaveOnStop, "leave-group", false, "with --group and static membership: on SIGINT or SIGTERM, leave the group so that this process's tasks move at once (a stop for good, such as a scale-down)")
	return c
}

// groupOnly are the flags that mean something only with --group.
var groupOnly = []string{"keyed-tasks", "checkpoint-dir", "member", "session-timeout", "static-membership", "leave-group", "exchange-version"}

// notWithGroup are the flags of a local run that group mode does not take,
// with the reason.
var notWithGroup = []struct{ flag, why string }{
	{"savepoint-dir", "a stop hands this process's tasks over with a checkpoint each, no savepoint"},
	{"parallelism", "each task runs at parallelism 1; start more processes (up to the tasks) to share the work"},
	{"fresh", "each task resumes from its own checkpoints under --checkpoint-dir"},
	{"restart", "a failed task is restarted by the group (after --session-timeout or at once)"},
	{"restart-attempts", "a failed task is restarted by the group"},
	{"restart-delay", "a failed task is restarted by the group"},
	{"restart-max-delay", "a failed task is restarted by the group"},
	{"allow-non-restored-state", "each task restores its own checkpoints"},
}

// checkRestartFlags refuses the restart flags that would mean nothing:
// the attempts, delays of no restart strategy, and --restart-max-delay
// without exponential back-off.
func checkRestartFlags(cmd *cobra.Command, s *pipeline.Spec, o pipeline.RestartSpec) error {
	strategy := "none"
	if s.Job.Restart != nil {
		strategy = s.Job.Restart.Strategy
	}
	if o.Strategy != "" {
		strategy = o.Strategy
	}
	for _, f := range []string{"restart-attempts", "restart-delay", "restart-max-delay"} {
		if cmd.Flags().Changed(f) && strategy == "none" {
			return usagef(cmd, "--%s: no restart strategy to configure; give --restart fixed-delay or exponential-backoff (or job.restart.strategy)", f)
		}
	}
	if cmd.Flags().Changed("restart-max-delay") && strategy != "exponential-backoff" {
		return usagef(cmd, "--restart-max-delay: only with exponential-backoff (the strategy is %s)", strategy)
	}
	return nil
}

// stopSavepointDir is where a stop by signal writes its savepoint: the
// --savepoint-dir given, else a new directory under the job's checkpoint
// directory (runtime.SavepointsDir, where a restart finds it), else one
// under $TMPDIR/weir-savepoints.
func stopSavepointDir(given, checkpointDir string, now time.Time) string {
	switch {
	case given != "":
		return given
	case checkpointDir == "":
		return shutdown.DefaultDir("", now)
	}
	// Named to the millisecond, and numbered if taken: a job stopped,
	// resumed and stopped again within a second needs a second name.
	name := "savepoint-" + now.UTC().Format("20060102-150405.000")
	p, local := checkpoint.LocalPath(checkpointDir)
	if !local {
		return checkpoint.Join(checkpoint.Join(checkpointDir, runtime.SavepointsDir), name)
	}
	dir := filepath.Join(p, runtime.SavepointsDir, name)
	for i := 2; ; i++ {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return dir
		}
		dir = filepath.Join(p, runtime.SavepointsDir, fmt.Sprintf("%s-%d", name, i))
	}
}

// checkGroupFlags checks --group and the flags that go with it.
func checkGroupFlags(cmd *cobra.Command, o *pipeline.ClusterOptions) error {
	fs := cmd.Flags()
	if !fs.Changed("group") {
		for _, f := range groupOnly {
			if fs.Changed(f) {
				return usagef(cmd, "--%s: needs --group (it configures a clustered run)", f)
			}
		}
		return nil
	}
	if o.Group == "" || strings.ContainsAny(o.Group, " /\\") {
		return usagef(cmd, "--group %q: want a non-empty name without spaces or slashes (it names the consumer group and the job's topics)", o.Group)
	}
	for _, f := range notWithGroup {
		if fs.Changed(f.flag) {
			return usagef(cmd, "--%s: not taken with --group: %s", f.flag, f.why)
		}
	}
	k := &checks{c: cmd}
	k.intRange("keyed-tasks", int64(o.KeyedTasks), 1, 32768)
	k.intRange("exchange-version", int64(o.ExchangeVersion), 0, 2)
	k.duration("session-timeout", o.SessionTimeout, 100*time.Millisecond)
	if k.err != nil {
		return k.err
	}
	if o.CheckpointBase != "" {
		if err := checkpoint.CheckLocation(o.CheckpointBase); err != nil {
			return usagef(cmd, "--checkpoint-dir: %v", err)
		}
	}
	// Static membership by default with a --member, which is what a
	// StatefulSet's pod name or a host's name gives: a stable identity.
	// The default member, HOST-PID, changes at every start.
	if !fs.Changed("static-membership") {
		o.StaticMembership = fs.Changed("member")
	}
	if o.StaticMembership && !fs.Changed("member") {
		return usagef(cmd, "--static-membership: needs --member, a name that stays the same across this process's restarts and differs from every other process's (such as a StatefulSet pod's name); the default, HOST-PID, changes at every start")
	}
	if o.LeaveOnStop && !o.StaticMembership {
		return usagef(cmd, "--leave-group: only for a static member (--member, without --static-membership=false); a dynamic member always leaves the group when it stops")
	}
	return nil
}

// runGroup runs the pipeline in group mode: this process's share of the
// clustered job, until the job has finished (a bounded source) or the
// first SIGINT or SIGTERM, which checkpoints this process's tasks, hands
// them over and leaves the group (exit 0; a second signal aborts with
// 130). A static member does not leave (its restart gets the tasks back)
// unless --leave-group.
func runGroup(ctx context.Context, cmd *cobra.Command, spec *pipeline.Spec, o pipeline.ClusterOptions, asJSON bool, uiAddr, logLevel string) error {
	log := cmd.ErrOrStderr()
	stopping := "leaving group " + o.Group + ": this process's tasks are checkpointed and handed over (send the signal again to abort at once)"
	if o.StaticMembership && !o.LeaveOnStop {
		stopping = "stopping member " + o.Member + " of group " + o.Group + ": its tasks are checkpointed and wait for its restart with --member " + o.Member +
			" for --session-timeout " + sessionTimeoutText(o.SessionTimeout) + ", then move to the other members (--leave-group moves them at once; send the signal again to abort at once)"
	}
	stop := shutdown.Notify(shutdown.Options{Log: log, Stopping: stopping})
	defer stop.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-stop.Requested():
			cancel()
		case <-ctx.Done():
		}
	}()
	o.Stdout = cmd.OutOrStdout()
	if logLevel == "" {
		logLevel = "warn"
	}
	o.Logger = newLogger(log, logLevel)
	if uiAddr != "" {
		// The dashboard shows the tasks this process runs.
		// The dashboard shows the tasks this process runs; its group page
		// (group.html, /api/group) every member of the group, their tasks
		// and their dashboards, whose URLs ride in the group membership.
		if o.Member == "" {
			host, _ := os.Hostname()
			o.Member = fmt.Sprintf("%s-%d", host, os.Getpid())
		}
		ui := newGroupUI(o.Group, o.Member)
		o.OnTask = ui.onTask
		o.OnGroup = ui.onGroup
		srv, err := dashboard.StartSource(uiAddr, ui, dashboard.Options{AgentStatus: noAgentStatus, Group: ui.describe})
		if err != nil {
			return fmt.Errorf("weir run: %w", err)
		}
		defer srv.Close()
		defer close(ui.done)
		o.Advertise = advertisedURL(srv.Addr())
		fmt.Fprintf(log, "weir run: dashboard of this process's tasks on %s (the whole group: %sgroup.html)\n", srv.URL(), o.Advertise)
	}
	s, err := pipeline.RunCluster(ctx, spec, o, log)
	var es pipeline.Errors
	if errors.As(err, &es) { // an unknown topic
		return pipelineUsage(cmd, err)
	}
	if err != nil {
		return err
	}
	return finishRun(cmd, s, asJSON)
}

// finishRun prints the summary as JSON if asked, and makes a run that
// dropped records for want of a dead-letter output exit with status 3: it
// finished, but lost data (dead letters sent to an output are not a
// loss: status 0).
func finishRun(cmd *cobra.Command, s pipeline.Summary, asJSON bool) error {
	if asJSON {
		// The summary, and which weir produced it.
		out := struct {
			pipeline.Summary
			Weir buildinfo.Info `json:"weir"`
		}{s, buildinfo.Get()}
		if err := json.NewEncoder(cmd.OutOrStdout()).Encode(out); err != nil {
			return err
		}
	}
	if s.Dropped > 0 {
		return &droppedError{msg: fmt.Sprintf("%s: %d records were dropped: a step (or the source) failed on them and has no deadLetters output to send them to (exit status %d; docs/pipelines.md, \"Dead letters of steps\")",
			cmd.CommandPath(), s.Dropped, exitStatusDropped)}
	}
	return nil
}

// resumeCommand is the command line that restores the pipeline this command
// runs from the savepoint in dir: the same arguments, with --restore dir
// instead of any earlier --restore.
func resumeCommand(c *cobra.Command, dir string) string {
	parts := []string{"weir run"}
	c.Flags().Visit(func(f *pflag.Flag) {
		if f.Name == "restore" || f.Name == "savepoint-dir" {
			return
		}
		parts = append(parts, "--"+f.Name+"="+shellQuote(f.Value.String()))
	})
	parts = append(parts, "--restore", shellQuote(dir))
	for _, a := range c.Flags().Args() {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '=' || r == ',' ||
			('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// sessionTimeoutText is d as given to --session-timeout (its default 3s
// when 0).
func sessionTimeoutText(d time.Duration) string {
	if d == 0 {
		d = 3 * time.Second
	}
	return d.String()
}
