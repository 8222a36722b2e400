package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/internal/mutant"
)

// member is this process's part in the job: its place in the consumer
// group and the tasks the group gave it (M1-M4 in the package
// documentation).
//
// The group's callbacks run on franz-go's goroutine: assigned starts each
// new task in its own goroutine (a restore may take long, and the group's
// heartbeats must go on); revoked and lost stop the tasks and return only
// once they have stopped, so that the next owner never runs a task next to
// this process.
//
// franz-go does not call lost when a JoinGroup answers UNKNOWN_MEMBER_ID
// (the coordinator removed this process while it was away, e.g. past the
// rebalance timeout during a broker outage): it joins again as a new
// member and keeps its partitions, and the next session revokes or keeps
// them as if nothing had happened, although the group gave them to others
// meanwhile. The callbacks therefore compare the client's member id with
// the one of the session the running tasks were started in (session): a
// new one means that session was lost, and its tasks are stopped as lost
// (M3) before anything else, those the new session keeps being started
// again (rejoined) from their latest checkpoints.
type member struct {
	cfg   Config
	ctx   context.Context // the tasks' parent
	specs []taskSpec      // by partition of the tasks topic
	mu    struct {
		sync.Mutex
		running map[int32]*taskRunner
		closing bool // no task starts any more
		// session is the group member id the running tasks belong to
		// ("" before the first assignment).
		session string
		// rejoined are the tasks stopped because their session was
		// lost that the client still counts as its own: assigned
		// starts them again unless a revoke took them first.
		rejoined []int32
	}
	evMu sync.Mutex
}

func newMember(ctx context.Context, cfg Config, specs []taskSpec) *member {
	m := &member{cfg: cfg, ctx: ctx, specs: specs}
	m.mu.running = map[int32]*taskRunner{}
	return m
}

// event reports ev to Config.OnTask, one call at a time.
func (m *member) event(ev TaskEvent) {
	ev.Member = m.cfg.Member
	ev.Time = time.Now().UnixMilli()
	if ev.SessionLost {
		m.cfg.Logger.Warn("cluster: task stopped after this process lost its group session or overran the rebalance timeout; "+
			"it may have run in another process meanwhile (fenced)", "task", ev.Task, "member", ev.Member)
	} else {
		args := []any{"task", ev.Task, "member", ev.Member, "restored", ev.Restored, "err", ev.Err}
		if ev.Epoch != 0 {
			args = append(args, "epoch", ev.Epoch)
		}
		m.cfg.Logger.Info("cluster: task "+string(ev.Kind), args...)
	}
	if m.cfg.OnTask == nil {
		return
	}
	m.evMu.Lock()
	defer m.evMu.Unlock()
	m.cfg.OnTask(ev)
}

func (m *member) assigned(_ context.Context, cl *kgo.Client, parts map[string][]int32) {
	m.endLostSession(cl)
	m.mu.Lock()
	start := append(m.mu.rejoined, parts[m.cfg.TasksTopic()]...)
	m.mu.rejoined = nil
	m.mu.Unlock()
	for _, p := range start {
		if int(p) >= len(m.specs) {
			m.cfg.Logger.Error("cluster: the tasks topic has more partitions than the job has tasks; ignoring the extra one", "partition", p)
			continue
		}
		m.mu.Lock()
		if _, ok := m.mu.running[p]; ok || m.mu.closing {
			m.mu.Unlock()
			continue
		}
		ctx, cancel := context.WithCancel(m.ctx)
		t := &taskRunner{spec: m.specs[p], m: m, cancel: cancel, done: make(chan struct{})}
		m.mu.running[p] = t
		m.mu.Unlock()
		go t.loop(ctx)
	}
	if m.cfg.OnAssignment != nil {
		m.mu.Lock()
		tasks := make([]string, 0, len(m.mu.running))
		for p := range m.mu.running {
			tasks = append(tasks, m.specs[p].id)
		}
		m.mu.Unlock()
		slices.Sort(tasks)
		m.cfg.OnAssignment(tasks)
	}
}

// onRevoked is the group's revoke callback: revoked, then a TaskRevoked
// event per task the group took, once this process has handed it over.
func (m *member) onRevoked(ctx context.Context, cl *kgo.Client, parts map[string][]int32) {
	m.revoked(ctx, cl, parts)
	for _, p := range parts[m.cfg.TasksTopic()] {
		if int(p) < len(m.specs) {
			m.event(TaskEvent{Task: m.specs[p].id, Kind: TaskRevoked})
		}
	}
}

func (m *member) revoked(_ context.Context, cl *kgo.Client, parts map[string][]int32) {
	if mutant.On(mutant.ClusterRevokedKeepRunning) {
		return
	}
	revoked := parts[m.cfg.TasksTopic()]
	if m.endLostSession(cl) {
		m.mu.Lock()
		m.mu.rejoined = slices.DeleteFunc(m.mu.rejoined, func(p int32) bool { return slices.Contains(revoked, p) })
		m.mu.Unlock()
	}
	m.stop(revoked, true, time.Now())
}

// endLostSession stops, as lost (no checkpoint, SessionLost), every task
// of an earlier group session whose member id is no longer the client's:
// the coordinator removed that member and may have given its tasks to
// others already, and franz-go rejoined without calling lost (see
// member). The stopped tasks are kept in rejoined, for assigned to start
// again those the new session still gives this process. It reports
// whether it stopped any.
func (m *member) endLostSession(cl *kgo.Client) bool {
	id, _ := cl.GroupMetadata()
	m.mu.Lock()
	prev := m.mu.session
	m.mu.session = id
	var lost []int32
	if prev != "" && id != prev {
		for p := range m.mu.running {
			lost = append(lost, p)
		}
	}
	m.mu.rejoined = append(m.mu.rejoined, lost...)
	m.mu.Unlock()
	if len(lost) == 0 {
		return false
	}
	m.cfg.Logger.Warn("cluster: this process rejoined the group as a new member (the coordinator had removed it, e.g. past the rebalance timeout): "+
		"its tasks stop as lost and those it is given again restart from their latest checkpoints", "previous_member_id", prev, "member_id", id, "tasks", len(lost))
	m.stop(lost, false, time.Time{})
	return true
}

// lost: the group gave the tasks away already (this process missed its
// session): stop at once, without a checkpoint; the new owner's
// transactional ids fence whatever this process still writes.
func (m *member) lost(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	m.stop(parts[m.cfg.TasksTopic()], false, time.Time{})
}

// stopAll stops every task of this process (with a checkpoint each,
// unless lost: its session is gone, M3) and keeps new ones from starting.
func (m *member) stopAll(lost bool) {
	m.mu.Lock()
	m.mu.closing = true
	parts := make([]int32, 0, len(m.mu.running))
	for p := range m.mu.running {
		parts = append(parts, p)
	}
	m.mu.Unlock()
	m.stop(parts, !lost, time.Time{})
}

// sessionGone reports whether the group no longer has this process's
// member: the coordinator removed it (a session that expired during a
// broker outage, say) and no group call has told the client yet. A
// bounded member whose tasks have all finished asks before it stops them
// (C2): its tasks may have run elsewhere meanwhile, and a finished one
// ran on beside its new owner. An answer it cannot get counts as kept.
func (m *member) sessionGone(cl *kgo.Client) bool {
	id, _ := cl.GroupMetadata()
	if id == "" {
		return false
	}
	// A client of its own: the group client's connection to the
	// coordinator may be stuck behind a heartbeat that gets no answer.
	adm, err := kgo.NewClient(m.cfg.plainClientOptions()...)
	if err != nil {
		return false
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.SessionTimeout)
	defer cancel()
	gs, err := kadm.NewClient(adm).DescribeGroups(ctx, m.cfg.Group)
	if err != nil {
		return false
	}
	g, ok := gs[m.cfg.Group]
	if !ok || g.Err != nil {
		return false
	}
	for _, d := range g.Members {
		if d.MemberID == id {
			return false
		}
	}
	m.cfg.Logger.Warn("cluster: the group no longer has this process's member (the coordinator removed it): its finished tasks stop as lost",
		"group", m.cfg.Group, "member_id", id)
	return true
}

// stop stops the tasks of parts concurrently and waits for them. (franz-go
// calls the revoke callback with no partitions at the end of every
// cooperative session: that stops nothing.) A revoke passes the time it
// began: a task that took longer than the rebalance timeout to stop is
// reported with SessionLost, as one stopped without a checkpoint is.
func (m *member) stop(parts []int32, checkpoint bool, revoked time.Time) {
	m.mu.Lock()
	var ts []*taskRunner
	for _, p := range parts {
		if t, ok := m.mu.running[p]; ok {
			ts = append(ts, t)
			delete(m.mu.running, p)
		}
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.stop(checkpoint, revoked)
		}()
	}
	wg.Wait()
	if took := time.Since(revoked); !revoked.IsZero() && len(ts) > 0 && took >= m.cfg.RebalanceTimeout {
		m.cfg.Logger.Warn("cluster: handing over tasks took longer than the rebalance timeout; the group may have given them to other processes "+
			"before they stopped here (what they wrote since is fenced); lower RevokeCheckpointTimeout or raise RebalanceTimeout",
			"took", took, "rebalance_timeout", m.cfg.RebalanceTimeout, "tasks", len(ts))
	}
}

// allFinished reports whether every task of the job has finished (in any
// process): each has its finished marker.
func (m *member) allFinished() bool {
	for _, s := range m.specs {
		if done, err := (checkpoint.Storage{}).HasMarker(taskDir(m.cfg, s.id), finishedFile); err != nil || !done {
			return false
		}
	}
	return true
}

// join joins the group and keeps this process in it until ctx ends, in
// bounded mode every task has finished, or (static membership) another
// process with the same member id fenced this one; then it stops its
// tasks (with a checkpoint each) and leaves the group (a static member:
// only when its tasks have finished, or with LeaveOnStop, M6).
func (m *member) join(ctx context.Context) error {
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(seeds(m.cfg.Brokers)...),
		kgo.ClientID(groupClientID(m.cfg.Member, m.cfg.Advertise)),
		kgo.ConsumerGroup(m.cfg.Group),
		kgo.ConsumeTopics(m.cfg.TasksTopic()),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.SessionTimeout(m.cfg.SessionTimeout),
		kgo.RebalanceTimeout(m.cfg.RebalanceTimeout),
		kgo.HeartbeatInterval(m.cfg.HeartbeatInterval),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(m.assigned),
		kgo.OnPartitionsRevoked(m.onRevoked),
		kgo.OnPartitionsLost(m.lost),
	}, m.cfg.clientOptions()...)
	fenced := &fenceHook{fenced: make(chan struct{})}
	if m.cfg.StaticMembership {
		// M6: the member id is the group instance id. M7: a second
		// process with the same one fences this one.
		opts = append(opts, kgo.InstanceID(m.cfg.Member), kgo.WithHooks(fenced))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	if m.cfg.OnGroup != nil {
		adm := kadm.NewClient(cl)
		m.cfg.OnGroup(func(ctx context.Context) ([]GroupMember, error) { return m.describe(ctx, adm) })
	}
	pollCtx, stopPoll := context.WithCancel(ctx)
	polled := make(chan error, 1)
	go func() {
		// Polling keeps the client in the group; the tasks topic holds no
		// records.
		for {
			fs := cl.PollFetches(pollCtx)
			if pollCtx.Err() != nil {
				polled <- nil
				return
			}
			var ferr error
			fs.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.Canceled) {
					ferr = err
				}
			})
			if ferr != nil {
				m.cfg.Logger.Warn("cluster: group client", "err", ferr)
			}
		}
	}()
	var result error
	var finished bool
	var tick <-chan time.Time
	if m.cfg.Bounded {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		tick = t.C
	}
wait:
	for {
		select {
		case <-ctx.Done():
			result = ctx.Err()
			break wait
		case <-fenced.fenced:
			// The group lost this process's tasks already (franz-go
			// called lost: they stopped without a checkpoint, M3);
			// franz-go would rejoin and be fenced again, for ever.
			result = &FencedMemberError{Group: m.cfg.Group, Member: m.cfg.Member}
			break wait
		case <-tick:
			if m.allFinished() {
				finished = true
				break wait
			}
		}
	}
	stopPoll()
	<-polled
	// Hand over with a checkpoint each, then leave: the others take the
	// tasks over from those checkpoints. A static member does not leave
	// on Close (M6): its tasks wait for it for SessionTimeout, unless it
	// leaves explicitly below.
	m.stopAll(finished && m.sessionGone(cl))
	cl.Close()
	if m.cfg.StaticMembership && (finished || m.cfg.LeaveOnStop && ctx.Err() != nil && errors.Is(result, ctx.Err())) {
		m.leaveStatic()
	}
	return result
}

// leaveStatic removes this static member from the group with a LeaveGroup
// request by its instance id (v3+), once its client has closed (a client
// still in the group would rejoin at once), so that the group gives its
// tasks to the others now rather than after the session timeout. A
// failure is logged: the session timeout removes the member anyway.
func (m *member) leaveStatic() {
	cl, err := kgo.NewClient(m.cfg.plainClientOptions()...)
	if err == nil {
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var resp kadm.LeaveGroupResponses
		if resp, err = kadm.NewClient(cl).LeaveGroup(ctx, kadm.LeaveGroup(m.cfg.Group).InstanceIDs(m.cfg.Member).
			Reason("weir: the member stops for good")); err == nil {
			err = resp.Error()
		}
	}
	if err != nil {
		m.cfg.Logger.Warn("cluster: leave the group as a static member; its tasks move after the session timeout", "group", m.cfg.Group,
			"member", m.cfg.Member, "err", err)
		return
	}
	m.cfg.Logger.Info("cluster: left the group", "group", m.cfg.Group, "member", m.cfg.Member)
}

// FencedMemberError is Run's error when another process joined the group
// as a static member with this process's Config.Member (M7): the broker
// fenced this one (FENCED_INSTANCE_ID), and its tasks run there now.
type FencedMemberError struct {
	Group, Member string
}

func (e *FencedMemberError) Error() string {
	return fmt.Sprintf("cluster: member %q of group %q was fenced: another process joined the group as a static member with the same member id "+
		"and runs this process's tasks now; give each process its own member id (Config.Member, weir run --member)", e.Member, e.Group)
}

// Unwrap returns kerr.FencedInstanceID.
func (e *FencedMemberError) Unwrap() error { return kerr.FencedInstanceID }

// fenceHook closes fenced when the group management loop ends on
// FENCED_INSTANCE_ID (kgo.HookGroupManageError, called on franz-go's
// group goroutine after it called lost).
type fenceHook struct {
	once   sync.Once
	fenced chan struct{}
}

func (h *fenceHook) OnGroupManageError(err error) {
	if errors.Is(err, kerr.FencedInstanceID) {
		h.once.Do(func() { close(h.fenced) })
	}
}

// describe describes the group: its weir members, each with the tasks
// assigned to it, by member name.
func (m *member) describe(ctx context.Context, adm *kadm.Client) ([]GroupMember, error) {
	gs, err := adm.DescribeGroups(ctx, m.cfg.Group)
	if err != nil {
		return nil, fmt.Errorf("cluster: describe group %q: %w", m.cfg.Group, err)
	}
	g, ok := gs[m.cfg.Group]
	if !ok {
		return nil, fmt.Errorf("cluster: describe group %q: not in the answer", m.cfg.Group)
	}
	if g.Err != nil {
		return nil, fmt.Errorf("cluster: describe group %q: %w", m.cfg.Group, g.Err)
	}
	var out []GroupMember
	for _, d := range g.Members {
		name, url, ok := parseGroupClientID(d.ClientID)
		if !ok {
			continue
		}
		gm := GroupMember{Member: name, Host: d.ClientHost, URL: url, Tasks: []string{}}
		if a, ok := d.Assigned.AsConsumer(); ok {
			var parts []int32
			for _, t := range a.Topics {
				if t.Topic == m.cfg.TasksTopic() {
					parts = append(parts, t.Partitions...)
				}
			}
			slices.Sort(parts)
			for _, p := range parts {
				if int(p) < len(m.specs) {
					gm.Tasks = append(gm.Tasks, m.specs[p].id)
				}
			}
		}
		out = append(out, gm)
	}
	slices.SortFunc(out, func(a, b GroupMember) int { return strings.Compare(a.Member, b.Member) })
	return out, nil
}

// seeds splits comma-separated broker lists.
func seeds(brokers []string) []string {
	var out []string
	for _, b := range brokers {
		for _, x := range strings.Split(b, ",") {
			if x = strings.TrimSpace(x); x != "" {
				out = append(out, x)
			}
		}
	}
	return out
}
