package pipeline

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/runtime"
)

// JobName is the name a pipeline's job records in its checkpoints and
// savepoints, and checks when it resumes from its checkpoint directory: the
// pipeline's name, or its file's name without the extension.
func JobName(s *Spec) string {
	if s.Name != "" {
		return s.Name
	}
	base := filepath.Base(s.File)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// resumes tells whether the job resumes from the newest snapshot in its
// checkpoint directory (runtime.CheckpointConfig.Resume): when it has one,
// unless opts.Fresh, or the pipeline runs an in-memory embedded broker
// (its topics, offsets and transactions, which a checkpoint refers to, are
// new at every start, so the job starts over with them).
func resumes(spec *Spec, opts Options) bool {
	return spec.Job.CheckpointDir != "" && !opts.Fresh && !inMemoryBroker(spec)
}

func inMemoryBroker(s *Spec) bool {
	return s.Kafka != nil && s.Kafka.Embedded != nil && s.Kafka.Embedded.Dir == ""
}

// restartStrategy is the job's runtime.RestartStrategy: job.restart with
// opts.Restart's overrides.
func restartStrategy(spec *Spec, opts Options) runtime.RestartStrategy {
	var r RestartSpec
	if spec.Job.Restart != nil {
		r = *spec.Job.Restart
	}
	o := opts.Restart
	if o.Strategy != "" {
		r.Strategy = o.Strategy
	}
	if o.Attempts > 0 {
		r.Attempts = o.Attempts
	}
	if o.Delay > 0 {
		r.Delay = o.Delay
	}
	if o.MaxDelay > 0 {
		r.MaxDelay = o.MaxDelay
	}
	rs := runtime.RestartStrategy{Attempts: r.Attempts, Delay: r.Delay, MaxDelay: r.MaxDelay, Multiplier: r.Multiplier, ResetAfter: r.ResetAfter}
	switch r.Strategy {
	case "fixed-delay":
		rs.Kind = runtime.RestartFixedDelay
	case "exponential-backoff":
		rs.Kind = runtime.RestartExponentialBackoff
	}
	return rs
}

// CheckStart makes every check of what Run finds wrong before the job
// starts that needs no broker: the files the job reads exist; the
// directories it writes (job.checkpoint.dir, job.stateDir, file sinks,
// agent WALs) are not files; the snapshot it restores (opts.RestoreFrom or
// job.restoreFrom: a snapshot, or the directory holding chk-N) exists, and
// without one the newest checkpoint of job.checkpoint.dir, which the job
// resumes from unless opts.Fresh, is this pipeline's (JobName). Local
// locations are checked; a bucket URL only for its form. `weir validate`
// and `weir run` both call it (Run too), so they agree. A problem of the
// file is an Errors at its position; one of opts (a flag) a plain error
// naming the option.
func CheckStart(spec *Spec, opts Options) error {
	var errs Errors
	add := func(p Pos, format string, args ...any) {
		errs = append(errs, &Error{Pos: p, Msg: fmt.Sprintf(format, args...)})
	}
	if f := spec.Source.File; f != nil {
		for _, p := range f.Paths {
			if fi, err := os.Stat(p); err != nil {
				add(f.Pos, "source.file.paths: %v; want existing JSON-lines files (relative paths are relative to the pipeline file)", err)
			} else if fi.IsDir() {
				add(f.Pos, "source.file.paths: %s is a directory; want JSON-lines files", p)
			}
		}
	}
	if k := spec.Kafka; k != nil && k.Embedded != nil && k.Embedded.Dir == "" {
		// An in-memory broker loads every produce file at each start (a
		// persistent one only into empty topics, so its files may be gone).
		for i, p := range k.Embedded.Produce {
			if _, err := os.Stat(p.File); err != nil {
				add(p.Pos, "kafka.embedded.produce[%d].file: %v; want an existing JSON-lines file", i, err)
			}
		}
	}
	dirs := []struct {
		what, loc string
		pos       Pos
	}{
		{"job.checkpoint.dir", spec.Job.CheckpointDir, spec.Job.CheckpointDirPos},
		{"job.stateDir", spec.Job.StateDir, spec.Job.StateDirPos},
	}
	sinks := map[string]*SinkSpec{"sink": spec.Sink}
	stepsOf := map[string][]StepSpec{"steps": spec.Steps}
	for name, o := range spec.Outputs {
		sinks["outputs."+name+".sink"] = o.Sink
		stepsOf["outputs."+name+".steps"] = o.Steps
	}
	for _, what := range sortedKeys(sinks) {
		if s := sinks[what]; s != nil && s.File != nil {
			if s.File.Dir != "" {
				dirs = append(dirs, struct {
					what, loc string
					pos       Pos
				}{what + ".file.dir", s.File.Dir, s.Pos})
			} else if fi, err := os.Stat(s.File.Path); err == nil && fi.IsDir() {
				add(s.Pos, "%s.file.path: %s is a directory; want a file (or dir: for exactly-once files)", what, s.File.Path)
			}
		}
	}
	for _, what := range sortedKeys(stepsOf) {
		for i, st := range stepsOf[what] {
			if st.Agent != nil && st.Agent.Store != nil && st.Agent.Store.WALDir != "" {
				dirs = append(dirs, struct {
					what, loc string
					pos       Pos
				}{fmt.Sprintf("%s[%d].agent.store.wal", what, i), st.Agent.Store.WALDir, st.Agent.Store.Pos})
			}
		}
	}
	for _, d := range dirs {
		if d.loc == "" {
			continue
		}
		if err := checkpoint.CheckLocation(d.loc); err != nil && d.what == "job.checkpoint.dir" {
			add(d.pos, "%s: %v", d.what, err)
			continue
		}
		p, local := checkpoint.LocalPath(d.loc)
		if !local {
			continue
		}
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			add(d.pos, "%s: %s is a file; want a directory (or a path where one can be made)", d.what, p)
		}
	}
	var flagErr error
	restore, restorePos, flag := spec.Job.RestoreFrom, spec.Job.RestoreFromPos, false
	if opts.RestoreFrom != "" {
		restore, flag = opts.RestoreFrom, true
	}
	if restore != "" {
		bad := func(format string, args ...any) {
			if flag {
				flagErr = fmt.Errorf("--restore %s", fmt.Sprintf(format, args...))
			} else {
				add(restorePos, "job.restoreFrom %s", fmt.Sprintf(format, args...))
			}
		}
		if err := checkpoint.CheckLocation(restore); err != nil {
			bad("%q: %v", restore, err)
		} else if _, local := checkpoint.LocalPath(restore); local {
			if _, err := checkpoint.Resolve(restore); err != nil {
				bad("%q: %v", restore, err)
			}
		}
	}
	if cd := spec.Job.CheckpointDir; resumes(spec, opts) && restore == "" && len(errs) == 0 {
		if _, local := checkpoint.LocalPath(cd); local {
			if latest, _, err := checkpoint.Latest(cd); err == nil {
				s, err := checkpoint.Read(latest)
				switch {
				case err != nil:
					add(spec.Job.CheckpointDirPos, "job.checkpoint.dir: the newest checkpoint, which the job would resume from, cannot be read: %v", err)
				case s.Job != "" && s.Job != JobName(spec):
					add(spec.Job.CheckpointDirPos, "job.checkpoint.dir: the newest checkpoint (%s) is of pipeline %q, not %q: give this pipeline a checkpoint directory of its own, or start it over with --fresh (the old checkpoints are ignored, then retired)",
						latest, s.Job, JobName(spec))
				}
			} else if !errors.Is(err, checkpoint.ErrNoSnapshot) {
				add(spec.Job.CheckpointDirPos, "job.checkpoint.dir: %v", err)
			}
		}
	}
	if err := runtime.ValidateConfig(runtime.Config{Restart: restartStrategy(spec, opts)}); err != nil && flagErr == nil {
		// Only flags can make a bad strategy (Parse checks job.restart):
		// a maximum delay shorter than the delay.
		flagErr = fmt.Errorf("--restart-max-delay and --restart-delay (with job.restart): %v", err)
	}
	if len(errs) > 0 {
		return errs
	}
	return flagErr
}
