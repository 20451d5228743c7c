package requirement

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/ledgerclient"
	"github.com/longhorn/diskschedule/internal/metrics"
)

// ErrNoLedger says a disk has no DiskSchedule.
var ErrNoLedger = errors.New("no ledger")

// ErrLedgerFull says a disk's ledger holds as many replica entries as it
// may (dsv1.MaxReplicaEntries).
var ErrLedgerFull = errors.New("ledger full")

// full returns ErrLedgerFull, with the numbers, when r would add a replica
// entry to ds past its bound.
func full(ds *dsv1.DiskSchedule, r Request) error {
	if r.Kind != ledger.Replica || len(ds.Spec.Replicas) < dsv1.MaxReplicaEntries {
		return nil
	}
	if _, ok := ds.Spec.Replicas[r.Name]; ok {
		return nil
	}
	return fmt.Errorf("%w: replica %s: disk %s of node %s already holds %d replica entries, the bound of a DiskSchedule (spec.replicas maxProperties, which keeps a ledger under etcd's request size limit)",
		ErrLedgerFull, r.Name, ds.Spec.Name, ds.Spec.NodeID, len(ds.Spec.Replicas))
}

// ErrNoLeader says no leader is deciding the ledgers: the leader-election
// Lease has no holder, or its holder stopped renewing it.
var ErrNoLeader = errors.New("no leader is deciding the ledgers")

// NoLeaderWait is how long a request waits for a leader to decide it when
// none is deciding, before it is answered with ErrNoLeader: a leader that
// takes over or renews late in that time decides it, and a write is never
// held longer than this for a leader that is gone.
const NoLeaderWait = 500 * time.Millisecond

// Leader tells whether a leader is deciding the ledgers (leader.Lease).
type Leader interface {
	// Deciding reports whether a leader decides now, until when it counts
	// as deciding should no news come, and a channel closed at the next
	// news of the leader.
	Deciding() (deciding bool, until time.Time, news <-chan struct{})
	// Why says, in words, why no leader decides (when Deciding is false).
	Why() string
	// Suspect asks, in the background, whether the holder still decides,
	// when a write has waited NoLeaderWait without a decision; a holder
	// found gone no longer counts as deciding, and the news channel is
	// closed when the answer is in.
	Suspect()
}

// cleanupTimeout bounds putting back what a refused write requested.
const cleanupTimeout = 5 * time.Second

// Executor carries out plans: it writes a plan's requests into the
// ledgers, waits for their decisions, puts back what a refused write
// requested, and answers. It reads through the manager's cache and writes
// DiskSchedule specs only: a request as a merge patch of its own keys
// (ledgerclient.Merge), a handoff, a version recorded and a put-back with
// an optimistic lock (ledgerclient.Edit, ledgerclient.PutBack), since
// they depend on the latest version.
type Executor struct {
	client    client.Client
	apiReader client.Reader
	waiter    *Waiter
	leader    Leader
	clock     clock.WithTicker
	batcher   *Batcher
	conflicts func()
	log       logr.Logger
	namespace string
	pace      pace
}

// NewExecutor returns the executor of the ledgers in namespace: c reads
// from the cache and writes, apiReader reads from the API server, waiter
// wakes waits on DiskSchedule updates, leader (when not nil) tells whether
// a leader is deciding (nil: one always is), clk times the waits (nil: the
// real clock), m (when not nil) counts each ledger write that lost a race
// and observes the batches of requests written.
func NewExecutor(c client.Client, apiReader client.Reader, waiter *Waiter, leader Leader, clk clock.WithTicker,
	m *metrics.Gate, log logr.Logger, namespace string) *Executor {
	if clk == nil {
		clk = clock.RealClock{}
	}
	e := &Executor{client: c, apiReader: apiReader, waiter: waiter, leader: leader, clock: clk, log: log, namespace: namespace}
	var observe func(int, time.Duration)
	if m != nil {
		e.conflicts = m.LedgerConflicts.Inc
		observe = func(size int, wait time.Duration) {
			m.BatchSize.Observe(float64(size))
			m.BatchWait.Observe(wait.Seconds())
		}
	}
	e.batcher = NewBatcher(c, clk, observe)
	return e
}

// Namespace is the namespace of the ledgers, and of Longhorn's objects.
func (e *Executor) Namespace() string { return e.namespace }

// Reader reads Longhorn's objects and the ledgers from the cache.
func (e *Executor) Reader() client.Reader { return e.client }

// Ledger returns the named DiskSchedule as the cache holds it, or nil
// when the disk has none.
func (e *Executor) Ledger(ctx context.Context, disk string) (*dsv1.DiskSchedule, error) {
	ds, err := e.read(ctx, disk)
	if errors.Is(err, ErrNoLedger) {
		return nil, nil
	}
	return ds, err
}

// asked is one request written, with what to put it back to.
type asked struct {
	Request
	prev, gen int64
}

// Execute carries out p for one admission (dryRun: write nothing) and
// answers it. Each request is read from the cache and admitted at once
// when granted there (when Confirm, only if the API server still holds
// the grant); otherwise it is written from the version read, and once
// every request is written their decisions are awaited. A refusal puts
// back every request written, as does a decision that does not come in
// time unless p keeps it. The answer says whether it took a ledger round
// trip (Answer.RoundTrip): whether any request was awaited.
func (e *Executor) Execute(ctx context.Context, p Plan, dryRun bool) (ans Answer) {
	if p.Answer != nil {
		return *p.Answer
	}
	if dryRun {
		return p.DryRun
	}
	start := e.clock.Now()
	var done []asked
	defer func() { ans.RoundTrip = len(done) > 0 }()
	for _, r := range p.Requests {
		a, ds, err := e.ask(ctx, r, start)
		switch {
		case errors.Is(err, ErrNoLedger) && a != nil:
			return e.putBackAll(ctx, done, Deny(r.Words.Gone))
		case errors.Is(err, ErrNoLedger):
			return e.putBackAll(ctx, done, Deny(r.Words.NoLedger))
		case errors.Is(err, ErrLedgerFull):
			return e.putBackAll(ctx, done, Deny(err.Error()))
		case errors.Is(err, ErrNoLeader):
			return e.undecided(ctx, p, done, Undecided(r.Words.Undecided, err))
		case err != nil:
			return e.putBackAll(ctx, done, Failed(err))
		case a.gen != 0 || ds == nil:
			done = append(done, *a)
		}
	}
	for _, a := range done {
		ds, err := e.await(ctx, a.Disk, a.gen, decided(a.Request), start)
		if err != nil {
			return e.undecided(ctx, p, done, Undecided(a.Words.Undecided, err))
		}
		e.pace.observe(e.clock.Now(), e.clock.Since(start))
		if !Granted(ds, a.Request) {
			return e.putBackAll(ctx, done, Deny(Refusal(a.Request, a.prev, ds)))
		}
	}
	return Allow(p.admitted(len(done) > 0))
}

// undecided answers v, a request's decision that did not come: what was
// written stays when p keeps it, and is put back otherwise.
func (e *Executor) undecided(ctx context.Context, p Plan, done []asked, v Answer) Answer {
	if p.KeepUndecided {
		return v
	}
	return e.putBackAll(ctx, done, v)
}

// ask admits r at once when its ledger grants it, or writes it once a
// leader decides (awaitLeader, counting from start, when the admission
// began). It returns the request written (with gen 0 and a nil ledger when
// granted at once), or, with ErrNoLedger, a non-nil ask when the ledger
// went away after it was read.
func (e *Executor) ask(ctx context.Context, r Request, start time.Time) (*asked, *dsv1.DiskSchedule, error) {
	ds, err := e.read(ctx, r.Disk)
	if err != nil {
		return nil, nil, err
	}
	if Granted(ds, r) && r.Confirm {
		// The cache may lag behind a release (the mirror's, of a grant no
		// write backs): admit at once only what the API server still holds.
		if ds, err = e.readLive(ctx, r.Disk); err != nil {
			return nil, nil, err
		}
	}
	if Granted(ds, r) {
		if r.Version == "" || ds.Spec.ReplicaVersions[r.Name] == r.Version {
			return &asked{Request: r}, ds, nil
		}
		// A retry of a placement whose earlier write lost: record the
		// version this write is admitted at, with the lock, while the grant
		// is still there (the mirror may be releasing it).
		held, latest := false, ds
		if _, err := e.editOn(ctx, ds, func(cur *dsv1.DiskSchedule) bool {
			held, latest = Granted(cur, r), cur.DeepCopy()
			return held && recordVersion(cur, r)
		}, ledgerclient.Edit); err != nil {
			return nil, nil, err
		}
		if held {
			return &asked{Request: r}, ds, nil
		}
		// Released meanwhile: ask afresh, from the version that says so.
		ds = latest
	}
	// What is written from here on waits for a leader to decide it.
	if err := e.awaitLeader(ctx, r.Disk, start); err != nil {
		return nil, nil, err
	}
	// A request the ledger rejected earlier at this very size stays
	// rejected; withdraw it, and ask afresh from the version that says so.
	if d, _ := Decision(ds, r); d == ledger.Rejected {
		withdrawn, err := e.editOn(ctx, ds, Withdraw(r), ledgerclient.PutBack)
		if err != nil {
			return nil, nil, err
		}
		if withdrawn != nil {
			ds = withdrawn
		}
	}
	if err := full(ds, r); err != nil {
		return nil, nil, err
	}
	a := &asked{Request: r, prev: before(ds, r)}
	var w *dsv1.DiskSchedule
	switch {
	case handsOff(ds, r):
		// The handoff depends on the latest version: with the lock.
		w, err = e.editOn(ctx, ds, Write(r), ledgerclient.Edit)
	case !written(ds, r):
		// Judged on the version read above (the API server's when the
		// cache lagged), so a request the cache still shows is written
		// again.
		w, err = e.writeRequest(ctx, r)
	}
	if err != nil {
		return a, nil, err
	}
	if w != nil {
		a.gen = w.Generation
	}
	return a, nil, nil
}

// writeRequest writes r's keys (requestPatch) as a merge patch without the
// resourceVersion lock, batched with the other requests to the same ledger
// at that moment (Batcher): it never loses the race to the other writers
// and the controller's status writes on a busy ledger, and a busy ledger
// takes one write per batch. A handoff to a reservation and a put-back
// keep the lock: they depend on what the latest version holds.
func (e *Executor) writeRequest(ctx context.Context, r Request) (*dsv1.DiskSchedule, error) {
	patch, err := requestPatch(r)
	if err != nil {
		return nil, err
	}
	w, err := e.batcher.Write(ctx, e.namespace, r.Disk, patch)
	if apierrors.IsNotFound(err) {
		return nil, ErrNoLedger
	}
	return w, err
}

// putBackAll returns every request in done to what it was before, then
// answers v. It outlives the admission's deadline by a bounded time, and
// never fails on a busy ledger (ledgerclient.PutBack). A new request the
// ledger rejected is left as decided (leftRejected): it holds nothing.
func (e *Executor) putBackAll(ctx context.Context, done []asked, v Answer) Answer {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	for _, a := range done {
		ds, err := e.read(ctx, a.Disk)
		if err == nil && leftRejected(ds, a) {
			continue
		}
		if err == nil {
			_, err = e.editOn(ctx, ds, PutBack(a.Request, a.prev), ledgerclient.PutBack)
		}
		if err != nil && !errors.Is(err, ErrNoLedger) {
			e.log.Error(err, "Putting back a refused request", "disk", a.Disk, "kind", a.Kind, "name", a.Name)
		}
	}
	return v
}

// leftRejected reports whether a, a request that was new on its ledger
// (nothing to put back to), stands rejected there with nothing held. Such
// an entry holds no bytes and counts as no pending request, so it is left
// as the ledger decided it rather than written away while the refused
// write waits for its answer: on a ledger busy with writers (a leader's
// take-over, a burst of placements) that write alone, with the
// optimistic lock, held the refusal for seconds. The next request of the
// same entry withdraws it first (ask), and the mirror releases it (rule
// 10) at once when the replica lands on another disk, or after the grace
// period.
func leftRejected(ds *dsv1.DiskSchedule, a asked) bool {
	d, _ := Decision(ds, a.Request)
	return a.prev == 0 && d == ledger.Rejected && scheduled(ds, a.Request) == 0
}

// read returns the named DiskSchedule from the cache, or ErrNoLedger.
func (e *Executor) read(ctx context.Context, disk string) (*dsv1.DiskSchedule, error) {
	return e.get(ctx, e.client, disk, "")
}

// readLive reads the named DiskSchedule from the API server, not the cache.
func (e *Executor) readLive(ctx context.Context, disk string) (*dsv1.DiskSchedule, error) {
	return e.get(ctx, e.apiReader, disk, " from the API server")
}

// get reads the named DiskSchedule with r (from says where, for errors),
// or returns ErrNoLedger.
func (e *Executor) get(ctx context.Context, r client.Reader, disk, from string) (*dsv1.DiskSchedule, error) {
	ds := &dsv1.DiskSchedule{}
	err := r.Get(ctx, client.ObjectKey{Namespace: e.namespace, Name: disk}, ds)
	if apierrors.IsNotFound(err) {
		return nil, ErrNoLedger
	}
	if err != nil {
		return nil, fmt.Errorf("reading the ledger of disk %s%s: %w", disk, from, err)
	}
	return ds, nil
}

// writer is how an edit is written (ledgerclient.Edit or PutBack).
type writer func(context.Context, client.Writer, client.Reader, *dsv1.DiskSchedule, func(*dsv1.DiskSchedule) bool, func()) (*dsv1.DiskSchedule, error)

// editOn writes edit with w, starting from base (a version the caller
// read, from the cache or the API server). It returns the version written,
// nil when edit changed nothing, and ErrNoLedger when the DiskSchedule is
// gone; the written version's generation is final once
// status.observedGeneration reaches it.
func (e *Executor) editOn(ctx context.Context, base *dsv1.DiskSchedule, edit func(*dsv1.DiskSchedule) bool, w writer) (*dsv1.DiskSchedule, error) {
	written, err := w(ctx, e.client, e.apiReader, base.DeepCopy(), edit, e.conflicted)
	if apierrors.IsNotFound(err) {
		return nil, ErrNoLedger
	}
	return written, err
}

func (e *Executor) conflicted() {
	if e.conflicts != nil {
		e.conflicts()
	}
}

// await waits until the named DiskSchedule's controller has decided
// generation gen and done says the answer is there, and returns the ledger
// as the informer delivered it. It returns ctx's error when the decision
// does not come in time, and ErrNoLeader once the admission (begun at
// start) has waited NoLeaderWait and either no leader has been deciding
// or none was seen deciding: nothing would decide the request before a
// new leader takes over, so the write is answered rather than held.
func (e *Executor) await(ctx context.Context, disk string, gen int64, done func(*dsv1.DiskSchedule) bool, start time.Time) (*dsv1.DiskSchedule, error) {
	changed, stop := e.waiter.subscribe(disk)
	defer stop()
	for {
		ds, err := e.read(ctx, disk)
		if err != nil {
			return nil, err
		}
		if ds.Generation >= gen && ds.Status.ObservedGeneration >= gen && done(ds) {
			return ds, nil
		}
		news, wake, err := e.leaderNews(start)
		if err != nil {
			return nil, fmt.Errorf("waiting for the decision on disk %s: %w", disk, err)
		}
		select {
		case <-changed:
		case <-news:
		case <-wake.C():
		case <-ctx.Done():
			wake.Stop()
			return nil, ctx.Err()
		}
		wake.Stop()
	}
}

// awaitLeader returns once a leader decides, or ErrNoLeader once none has
// for NoLeaderWait since start: a request written while no leader decides
// would only wait for the next one, and the writer's retries, placed on
// other disks from its view, would leave one such request on each, all
// granted at once by the next leader for one replica that lands on one.
func (e *Executor) awaitLeader(ctx context.Context, disk string, start time.Time) error {
	if e.leader == nil {
		return nil
	}
	for {
		deciding, _, news := e.leader.Deciding()
		if deciding {
			return nil
		}
		left := NoLeaderWait - e.clock.Since(start)
		if left <= 0 {
			return fmt.Errorf("not asked of the ledger of disk %s: %w", disk, noLeader(e.clock.Since(start), e.leader.Why()))
		}
		wake := e.clock.NewTimer(left)
		select {
		case <-news:
		case <-wake.C():
		case <-ctx.Done():
			wake.Stop()
			return fmt.Errorf("waiting for a leader to decide the ledger of disk %s: %w", disk, ctx.Err())
		}
		wake.Stop()
	}
}

// noLeader is ErrNoLeader after waiting waited, for the reason why.
func noLeader(waited time.Duration, why string) error {
	return fmt.Errorf("%w after %s: %s", ErrNoLeader, waited.Round(time.Millisecond), why)
}

// leaderNews returns ErrNoLeader once a request waiting since start has
// waited NoLeaderWait while no leader is deciding, or without a decision
// seen on any ledger for NoLeaderWait. Otherwise it returns the channel of
// the leader's news and a timer that fires when the answer may change
// without news: when a deciding leader would count as gone, or when
// NoLeaderWait is up.
//
// The Lease alone cannot tell a leader that stopped just after its last
// renewal for up to its renewal window (internal/leader): a leader that
// holds it but has decided nothing for NoLeaderWait while a request waits
// counts as not deciding. A live leader decides a request within
// milliseconds, and while it works through a backlog it decides on some
// ledger all the time; one that decides nothing for NoLeaderWait (longer
// when the recent decisions took longer: pace) is gone,
// not yet started (a take-over) or stalled, and the write is answered so
// that its writer retries, and finds its request granted
// (Plan.KeepUndecided) once a leader decides it.
func (e *Executor) leaderNews(start time.Time) (<-chan struct{}, clock.Timer, error) {
	if e.leader == nil {
		return nil, stopped{}, nil
	}
	now := e.clock.Now()
	deciding, until, news := e.leader.Deciding()
	if !deciding {
		left := NoLeaderWait - now.Sub(start)
		if left <= 0 {
			return nil, nil, noLeader(now.Sub(start), e.leader.Why())
		}
		return news, e.clock.NewTimer(left), nil
	}
	silent := start
	if last := e.waiter.LastDecision(); last.After(silent) {
		silent = last
	}
	quiet := now.Sub(silent)
	left := e.pace.silence(now) - quiet
	if left <= 0 {
		return nil, nil, fmt.Errorf("%w: no decision on any ledger for the last %s of the %s this write waited; the Lease's holder may be gone, still taking over, or stalled",
			ErrNoLeader, quiet.Round(time.Millisecond), now.Sub(start).Round(time.Millisecond))
	}
	wake := min(left, until.Sub(now))
	if quiet >= NoLeaderWait {
		// Ask the holder itself: one that is gone is answered for at
		// once, without waiting out its silence or its renewal window.
		e.leader.Suspect()
	} else {
		wake = min(wake, NoLeaderWait-quiet)
	}
	return news, e.clock.NewTimer(wake), nil
}

// stopped is a timer that never fires.
type stopped struct{}

func (stopped) C() <-chan time.Time      { return nil }
func (stopped) Stop() bool               { return false }
func (stopped) Reset(time.Duration) bool { return false }

// minSilence is how long, at the least, a Lease holder may decide nothing
// while a request waits before it counts as not deciding: a live leader
// decides within milliseconds as a rule, but one writing a ledger of
// thousands of entries was seen silent for 0.6 s on a lightly loaded
// machine, and longer under load.
const minSilence = 2 * time.Second

// paceWindow is how long the slowest recent decision counts (pace).
const paceWindow = 30 * time.Second

// maxSilence bounds how long a leader may decide nothing while a request
// waits before it counts as not deciding, however slow its recent
// decisions: well within the gate's timeout, so the write is answered.
const maxSilence = 6 * time.Second

// pace keeps how long the requests' recent decisions took, from the
// admission's start: a leader busy with large ledgers (a decision on a
// ledger of thousands of entries rewrites its whole status) on a loaded
// control plane decides a request in a second or more, and is not taken
// for gone when it is silent for less than three times that.
type pace struct {
	mu      sync.Mutex
	slowest time.Duration
	at      time.Time
}

// observe notes that a request's decision took d, at now.
func (p *pace) observe(now time.Time, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d > p.slowest || now.Sub(p.at) > paceWindow {
		p.slowest, p.at = d, now
	}
}

// silence is how long, at now, a leader may decide nothing while a request
// waits before it counts as not deciding: minSilence, or three times the
// slowest decision of the last paceWindow when that is longer, at most
// maxSilence.
func (p *pace) silence(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := minSilence
	if now.Sub(p.at) <= paceWindow {
		s = max(s, 3*p.slowest)
	}
	return min(s, maxSilence)
}
