package failover_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/gate"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/requirement"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/replicawriter"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

const (
	gib = int64(1) << 30
	// streamSize is each streamed volume's size: 4 × 400Gi disks hold 80,
	// and the stream asks for more, so the last are refused for space.
	streamSize = 20 * gib
	// streamGap is the time between two volumes of the stream.
	streamGap = 150 * time.Millisecond
	// writerPods is how many longhorn-manager pods place the stream.
	writerPods = 3
	// heldBound bounds how long the gate may hold any write through a
	// failover, a write answered because no leader decides included: well
	// under the gate's timeout, whatever the load. (On a lightly loaded
	// machine a killed leader holds none over 1 s: docs/benchmarks.md.)
	heldBound = gate.DefaultDecisionTimeout / 4
	// stallBound bounds how long a volume whose placement began during the
	// failover waits for its replica: the lease, then Longhorn's next look
	// at the volume (its informer resync at the latest).
	stallBound = leaseDuration + replicawriter.LonghornResync
)

// TestGateDuringFailover streams volumes, placed by Longhorn v1.12.0's own
// scheduler and datastore code (test/framework/testenv/replicawriter) from three
// longhorn-manager pods, through the gate of two leader-elected managers,
// while the managers go through a rolling restart (each stopped gracefully
// in turn, a new one started in its place) or the leader is killed (cut
// off from the API server first, so it cannot release its Lease, then
// stopped, and a new one started). It measures how long the gate held
// each write, how long each volume took from its first placement attempt
// to its replica persisted, and how long the Lease took to change hands,
// and checks what holds on a loaded machine: no disk ever holds more than
// its limit, a stopping leader releases its Lease so the other takes over
// before the lease could have expired, every write, those the gate answered
// because no leader decided included, was answered well under the gate's
// timeout, and no volume waited longer than the lease and Longhorn's next
// look at it.
func TestGateDuringFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	for _, tc := range []struct {
		name string
		kill bool
	}{
		{name: "rolling restart", kill: false},
		{name: "leader killed", kill: true},
	} {
		t.Run(tc.name, func(t *testing.T) { testGateDuringFailover(t, tc.kill) })
	}
}

// gateMember is one manager of the gate's failover: its lease timings,
// a transport that can cut it off, and when it last renewed the Lease.
type gateMember struct {
	index   int
	cut     cutOff
	renewed atomic.Int64 // unix nanoseconds of its last Lease write that succeeded
	// gate is the address its gate serves on, which its identity names.
	gate string
}

func (m *gateMember) configure(opts *manager.Options, cfg *rest.Config) {
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = leaseDuration, renewDeadline, retryPeriod
	if opts.Gate != nil {
		m.gate = net.JoinHostPort(opts.Gate.Host, strconv.Itoa(opts.Gate.Port))
	}
	cfg.Wrap(m.cut.wrap)
	cfg.Wrap(m.watchRenewals)
}

// watchRenewals records the member's Lease writes that succeeded: the
// member that writes the Lease leads.
func (m *gateMember) watchRenewals(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && req.Method == http.MethodPut && resp.StatusCode == http.StatusOK &&
			strings.HasSuffix(req.URL.Path, "/leases/"+manager.DefaultLeaderElectionID) {
			m.renewed.Store(time.Now().UnixNano())
		}
		return resp, err
	})
}

// gone returns a channel that yields when m's gate stops accepting
// connections, as a killed process's socket does.
func (m *gateMember) gone(ctx context.Context) <-chan time.Time {
	at := make(chan time.Time, 1)
	go func() {
		for ctx.Err() == nil {
			conn, err := net.DialTimeout("tcp", m.gate, time.Second)
			if err != nil {
				at <- time.Now()
				return
			}
			_ = conn.Close()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return at
}

// leads reports whether m renewed the Lease within the last two retry periods.
func (m *gateMember) leads() bool {
	return time.Since(time.Unix(0, m.renewed.Load())) < 2*retryPeriod
}

// write is one replica write of the writers, as the API server answered it.
type write struct {
	start    time.Time
	held     time.Duration
	code     int
	noLeader bool
	// why is, for a write refused for no leader, how the gate knew
	// (noLeaderReason).
	why string
}

// noLeaderReason names how the gate knew no leader decides, from its
// denial's words.
func noLeaderReason(body []byte) string {
	for _, r := range []struct{ words, why string }{
		{"is gone:", "holder gone when asked"},
		{"stopped renewing it", "renewals stopped"},
		{"has no holder", "no holder"},
		{"no decision on any ledger", "no decision seen"},
	} {
		if bytes.Contains(body, []byte(r.words)) {
			return r.why
		}
	}
	return "other"
}

// writeLog times every replica write of the writers.
type writeLog struct {
	mu     sync.Mutex
	writes []write
}

func (l *writeLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodPut || !strings.Contains(req.URL.Path, "/replicas/") {
			return rt.RoundTrip(req)
		}
		start := time.Now()
		resp, err := rt.RoundTrip(req)
		w := write{start: start, held: time.Since(start)}
		if err == nil {
			w.code = resp.StatusCode
			if resp.StatusCode != http.StatusOK {
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				resp.Body = io.NopCloser(bytes.NewReader(body))
				w.noLeader = bytes.Contains(body, []byte("no leader is deciding"))
				if w.noLeader {
					w.why = noLeaderReason(body)
				}
			}
		}
		l.mu.Lock()
		l.writes = append(l.writes, w)
		l.mu.Unlock()
		return resp, err
	})
}

// figures are one run's measurements.
type figures struct {
	writes, denied, noLeader, volumes, placed int
	// noLeaderWhy counts the writes refused for no leader by how the gate
	// knew.
	noLeaderWhy map[string]int
	// held is the longest any write was held, heldNoLeader the longest a
	// write answered for no leader was; heldFrom is when the longest began,
	// after the failover's start.
	held, heldNoLeader, heldFrom time.Duration
	// heldP99 is the 99th percentile of the writes' times.
	heldP99 time.Duration
	// stall is the longest a volume took from its first placement attempt
	// to its replica persisted, of the volumes whose attempts began during
	// the failover; stallVolume names it.
	stall       time.Duration
	stallVolume string
}

func testGateDuringFailover(t *testing.T, kill bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	members := []*gateMember{{index: 0}, {index: 1}}
	sb := sandboxtest.Start(t, sandboxtest.Options{Sandbox: sandbox.Options{
		Topology: fourDisks(),
		// Longhorn's own node controllers keep the nodes; the writers
		// below place the replicas.
		LonghornNodesOnly: true,
		Managers:          []sandbox.ManagerHook{members[0].configure, members[1].configure},
	}, KeepLogs: true})
	c := sb.Client()

	var leader *gateMember
	testenv.Eventually(t, ctx, time.Minute, "one manager renews the Lease", func(context.Context) (bool, string, error) {
		leader = nil
		for _, m := range members {
			if m.leads() {
				leader = m
			}
		}
		return leader != nil, "no manager renewed the Lease lately", nil
	})
	follower := members[1-leader.index]
	t.Logf("manager %d leads, manager %d follows", leader.index, follower.index)

	cfg := sb.AdminConfig()
	cfg.QPS, cfg.Burst = 500, 1000
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: sb.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	limits := diskLimits(ctx, t, wc)
	peaks, stopWatch := watchPersisted(ctx, t, wc)
	log := &writeLog{}
	writerCfg := rest.CopyConfig(cfg)
	writerCfg.Wrap(log.wrap)
	pods, err := replicawriter.StartPods(ctx, writerCfg, sandbox.Namespace, "node-1", "node-2", "node-3")
	if err != nil {
		t.Fatal(err)
	}

	// The stream: a volume every streamGap, each placed by the volume
	// controller of its pod, until the failover is over and a little more.
	type result struct {
		volume string
		out    replicawriter.Outcome
		err    error
	}
	results := make(chan result, 1024)
	stopStream := make(chan struct{})
	var placing sync.WaitGroup
	streamed := make(chan int, 1)
	go func() {
		ticker := time.NewTicker(streamGap)
		defer ticker.Stop()
		n := 0
		defer func() { streamed <- n }()
		for ; ; n++ {
			select {
			case <-stopStream:
				return
			case <-ticker.C:
			}
			rep, err := replicawriter.CreateVolume(ctx, c, sandbox.Namespace, fmt.Sprintf("stream-%03d", n), streamSize)
			if err != nil {
				results <- result{err: err}
				return
			}
			p := pods[n%len(pods)]
			placing.Go(func() {
				if err := p.WaitForVolumes(ctx, map[string][]string{rep.Spec.VolumeName: {rep.Name}}); err != nil {
					results <- result{volume: rep.Spec.VolumeName, err: err}
					return
				}
				out, err := p.Place(ctx, rep.Spec.VolumeName, rep.Name, replicawriter.Options{Live: wc, Resync: replicawriter.LonghornResync})
				results <- result{volume: rep.Spec.VolumeName, out: out, err: err}
			})
		}
	}()
	warm := func(what string) {
		// Let the stream run on a steady leader for a moment.
		testenv.Eventually(t, ctx, time.Minute, what, func(context.Context) (bool, string, error) {
			log.mu.Lock()
			n := len(log.writes)
			log.mu.Unlock()
			return n >= 10, fmt.Sprintf("%d writes", n), nil
		})
	}
	warm("the stream's first writes are answered")

	failoverStart := time.Now()
	start := func() *gateMember {
		t.Helper()
		m := &gateMember{}
		i, err := sb.StartManager(m.configure)
		if err != nil {
			t.Fatal(err)
		}
		m.index = i
		return m
	}
	handover := func(others ...*gateMember) (*gateMember, time.Duration) {
		t.Helper()
		at := time.Now()
		var next *gateMember
		testenv.Eventually(t, ctx, 2*leaseDuration+takeoverSlack, "another manager renews the Lease", func(context.Context) (bool, string, error) {
			for _, m := range others {
				if m.leads() && m.renewed.Load() > at.UnixNano() {
					next = m
					return true, "", nil
				}
			}
			return false, "no other manager renewed the Lease", nil
		}, testenv.Every(20*time.Millisecond))
		return next, time.Since(at)
	}
	var takeover time.Duration
	var killedRenewed time.Time
	var gateGone <-chan time.Time
	if kill {
		// Cut off, the leader cannot release its Lease: the other manager
		// takes it over once it expires. The Deployment starts a new pod.
		leader.cut.cut.Store(true)
		killedRenewed = time.Unix(0, leader.renewed.Load())
		gateGone = leader.gone(ctx)
		stopped := make(chan error, 1)
		go func() { stopped <- sb.StopManager(leader.index) }()
		var next *gateMember
		next, takeover = handover(follower)
		t.Logf("manager %d killed; manager %d renews the Lease %s later", leader.index, next.index, takeover.Round(time.Millisecond))
		if err := <-stopped; err != nil {
			t.Logf("manager %d, cut off, stopped with: %v", leader.index, err)
		}
		t.Logf("manager %d started %s after the failover began", start().index, time.Since(failoverStart).Round(time.Millisecond))
	} else {
		// The Deployment's rolling update: the follower first, then the
		// leader, each replaced by a new manager.
		if err := sb.StopManager(follower.index); err != nil {
			t.Errorf("stopping manager %d: %v", follower.index, err)
		}
		replacement := start()
		// The new manager serves the gate and follows the Lease before
		// the leader stops, as its readiness gates the rolling update.
		warm("the stream goes on with the new manager")
		stopAt := time.Now()
		if err := sb.StopManager(leader.index); err != nil {
			t.Errorf("stopping manager %d: %v", leader.index, err)
		}
		stopped := time.Since(stopAt)
		var next *gateMember
		next, takeover = handover(replacement)
		takeover += stopped
		t.Logf("manager %d stopped in %s and released its Lease; manager %d renews it %s after the stop began",
			leader.index, stopped.Round(time.Millisecond), next.index, takeover.Round(time.Millisecond))
		if takeover >= leaseDuration {
			t.Errorf("the Lease changed hands %s after the leader began to stop, not before the lease duration (%s): the leader did not release it",
				takeover.Round(time.Millisecond), leaseDuration)
		}
		start()
	}
	failoverEnd := time.Now()
	// The stream goes on a few seconds with the new leader, then stops.
	testenv.Eventually(t, ctx, time.Minute, "the stream runs on after the failover", func(context.Context) (bool, string, error) {
		return time.Since(failoverEnd) > 3*time.Second, "", nil
	}, testenv.Every(100*time.Millisecond))
	close(stopStream)
	n := <-streamed
	placing.Wait()
	close(results)
	stopWatch()

	f := figures{volumes: n}
	for r := range results {
		if r.err != nil {
			t.Errorf("volume %s: %v", r.volume, r.err)
			continue
		}
		if !r.out.Placed {
			continue
		}
		f.placed++
		if stall := r.out.Answered.Sub(r.out.Start); r.out.Start.After(failoverStart) && r.out.Start.Before(failoverEnd) && stall > f.stall {
			f.stall, f.stallVolume = stall, r.volume
		}
	}
	var helds []time.Duration
	for _, w := range log.writes {
		f.writes++
		helds = append(helds, w.held)
		if w.code != http.StatusOK {
			f.denied++
		}
		if w.held > f.held {
			f.held, f.heldFrom = w.held, w.start.Sub(failoverStart)
		}
		if w.noLeader {
			f.noLeader++
			if f.noLeaderWhy == nil {
				f.noLeaderWhy = map[string]int{}
			}
			f.noLeaderWhy[w.why]++
			f.heldNoLeader = max(f.heldNoLeader, w.held)
		}
		if w.held > heldBound {
			t.Errorf("a write (HTTP %d, refused for no leader: %v) was held %s from %s after the failover began, more than %s",
				w.code, w.noLeader, w.held.Round(time.Millisecond), w.start.Sub(failoverStart).Round(time.Millisecond), heldBound)
		}
	}
	// The longest holds, with when they began, say where the time went.
	longest := slices.Clone(log.writes)
	slices.SortFunc(longest, func(a, b write) int { return int(b.held - a.held) })
	for _, w := range longest[:min(5, len(longest))] {
		t.Logf("held %s from %s after the failover began: HTTP %d, no leader %v",
			w.held.Round(time.Millisecond), w.start.Sub(failoverStart).Round(time.Millisecond), w.code, w.noLeader)
	}
	slices.Sort(helds)
	if len(helds) > 0 {
		f.heldP99 = helds[len(helds)*99/100]
	}
	t.Logf("figures: %d volumes streamed, %d placed; %d writes, %d refused, %d of them for no leader %v; longest write held %s (began %s after the failover began), p99 %s, longest held for no leader %s; Lease changed hands after %s; longest stall of a volume that began during the failover %s (%s)",
		f.volumes, f.placed, f.writes, f.denied, f.noLeader, f.noLeaderWhy, f.held.Round(time.Millisecond), f.heldFrom.Round(time.Millisecond),
		f.heldP99.Round(time.Millisecond), f.heldNoLeader.Round(time.Millisecond), takeover.Round(time.Millisecond),
		f.stall.Round(time.Millisecond), f.stallVolume)

	var over []string
	for disk, peak := range peaks() {
		if peak > limits[disk] {
			over = append(over, fmt.Sprintf("%s: %s of %s", disk, ledger.Bytes(peak), ledger.Bytes(limits[disk])))
		}
	}
	t.Logf("disks over their limit: %d", len(over))
	if len(over) > 0 {
		t.Errorf("persisted bytes went over a disk's limit: %v", over)
	}
	if f.stall > stallBound {
		t.Errorf("volume %s waited %s for its replica, more than the lease and Longhorn's resync (%s)",
			f.stallVolume, f.stall.Round(time.Millisecond), stallBound)
	}
	if kill && f.noLeader == 0 {
		t.Errorf("no write was refused for no leader while the killed leader's Lease ran out: the stream did not reach the gate then")
	}
	if kill {
		checkProbe(t, log.writes, f.noLeaderWhy, killedRenewed, gateGone, failoverStart)
	}
	if f.placed == 0 {
		t.Error("no volume was placed")
	}
	select {
	case <-sb.Done():
		t.Errorf("a component of the sandbox stopped on its own: %v", sb.Err())
	default:
	}
}

// fourDisks is 4 nodes with one 400Gi disk each.
func fourDisks() *sandbox.Topology {
	topo, err := sandbox.ParseTopology([]byte(fourNodes))
	if err != nil {
		panic(err)
	}
	return topo
}

// diskLimits reads every disk's limit from its ledger, by UUID.
func diskLimits(ctx context.Context, t *testing.T, c client.Client) map[string]int64 {
	t.Helper()
	list := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, ds := range list.Items {
		out[ds.Name] = ds.Status.StorageLimit
	}
	if len(out) != 4 {
		t.Fatalf("%d ledgers, want 4", len(out))
	}
	return out
}

// watchPersisted follows every Replica event and records, per disk UUID,
// the largest number of bytes persisted on it (ledger.PersistedByDisk;
// the run creates no backing image, whose copies are read when the watch
// starts and when it stops); stop ends the watch and adds what is
// persisted then.
func watchPersisted(ctx context.Context, t *testing.T, c client.WithWatch) (peaks func() map[string]int64, stop func()) {
	t.Helper()
	list := &lhv1.ReplicaList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx, &lhv1.ReplicaList{}, client.InNamespace(sandbox.Namespace),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	images := &lhv1.BackingImageList{}
	if err := c.List(ctx, images, client.InNamespace(sandbox.Namespace)); err != nil {
		t.Fatal(err)
	}
	peak := map[string]int64{}
	record := func(replicas []lhv1.Replica) {
		for disk, p := range ledger.PersistedByDisk(replicas, images.Items, nil) {
			peak[disk] = max(peak[disk], p.Total())
		}
	}
	record(list.Items)
	on := map[string]lhv1.Replica{}
	for _, r := range list.Items {
		on[r.Name] = r
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			rep, ok := ev.Object.(*lhv1.Replica)
			if !ok {
				continue
			}
			if ev.Type == "DELETED" {
				delete(on, rep.Name)
			} else {
				on[rep.Name] = *rep
			}
			now := make([]lhv1.Replica, 0, len(on))
			for _, x := range on {
				now = append(now, x)
			}
			record(now)
		}
	}()
	stop = func() {
		w.Stop()
		<-done
		final := &lhv1.ReplicaList{}
		if err := c.List(ctx, final, client.InNamespace(sandbox.Namespace)); err != nil {
			t.Error(err)
			return
		}
		if err := c.List(ctx, images, client.InNamespace(sandbox.Namespace)); err != nil {
			t.Error(err)
			return
		}
		record(final.Items)
	}
	return func() map[string]int64 { return peak }, stop
}

// probeSlack is how long a probe of a holder whose socket is closed may
// take, on a loaded machine, from the write's NoLeaderWait to its verdict.
const probeSlack = 250 * time.Millisecond

// checkProbe checks that the killed leader, once its gate stopped
// answering at its address, was found gone by the follower's gate
// probing it, for the writes that waited while the follower still counted
// its renewals as on time: a write that waited NoLeaderWait then is
// answered by the probe, not by the renewal window. The killed manager,
// stopped in this process, closes its gate last (controller-runtime stops
// webhooks after the rest), so on a loaded machine it may answer past the
// window, and then the renewal window answers first, as it should.
func checkProbe(t *testing.T, writes []write, why map[string]int, renewed time.Time, gateGone <-chan time.Time, failoverStart time.Time) {
	t.Helper()
	windowEnd := renewed.Add(3 * retryPeriod / 2) // leader.Lease's renewal window
	var gone time.Time
	select {
	case gone = <-gateGone:
	default:
		t.Logf("the killed manager's gate still accepted connections at the end")
		return
	}
	probed := 0
	for _, w := range writes {
		if w.noLeader && !w.start.Before(gone) && w.start.Add(requirement.NoLeaderWait+probeSlack).Before(windowEnd) {
			probed++
		}
	}
	t.Logf("the killed manager's gate stopped answering %s after the failover began, its renewal window ran out at %s; %d writes refused for no leader could have been answered by the probe",
		gone.Sub(failoverStart).Round(time.Millisecond), windowEnd.Sub(failoverStart).Round(time.Millisecond), probed)
	if probed > 0 && why["holder gone when asked"] == 0 {
		t.Errorf("no write was refused because the killed holder was found gone at its address: %v", why)
	}
}
