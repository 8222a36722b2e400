package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/pipeline"
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
		spec   *pipeline.Spec
		opts   pipeline.Options
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "run PIPELINE.yaml",
		Short: "Run a pipeline file (see docs/pipelines.md); records of stdout sinks on stdout, progress and summary on stderr",
		Args:  exactArgs(1, "one pipeline file"),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			k := &checks{c: cmd}
			if opts.MetricsAddr != "" {
				k.hostPort("metrics-addr", opts.MetricsAddr)
			}
			k.intRange("parallelism", int64(opts.Parallelism), 0, 32768)
			if k.err != nil {
				return k.err
			}
			s, err := pipeline.ParseFile(args[0])
			if err != nil {
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
			ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			opts.Stdout = cmd.OutOrStdout()
			s, err := pipeline.Run(ctx, spec, opts, cmd.ErrOrStderr())
			var es pipeline.Errors
			if errors.As(err, &es) { // an unknown topic, found when the job was built
				return pipelineUsage(cmd, err)
			}
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(s)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&opts.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address (overrides job.metricsAddr)")
	f.StringVar(&opts.RestoreFrom, "restore", "", "start from this savepoint or checkpoint directory (overrides job.restoreFrom)")
	f.IntVar(&opts.Parallelism, "parallelism", 0, "parallelism (overrides job.parallelism; 0: the file's)")
	f.BoolVar(&asJSON, "json", false, "print the summary as JSON on stdout at the end")
	return c
}
