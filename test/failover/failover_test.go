package failover_test

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/extender"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/controlplane"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// fourNodes has room for 16 volumes of 100Gi, four per node.
const fourNodes = `
nodes:
- name: node-1
  disks: [{name: disk-1, size: 400Gi}]
- name: node-2
  disks: [{name: disk-1, size: 400Gi}]
- name: node-3
  disks: [{name: disk-1, size: 400Gi}]
- name: node-4
  disks: [{name: disk-1, size: 400Gi}]
`

const (
	// podCount pods each use their own claim of volumeSize.
	podCount   = 12
	volumeSize = "100Gi"
	// podsPerNode is how many of those volumes one node's disk holds.
	podsPerNode = 4
	// stopAfter is how many pods are bound when the leader stops.
	stopAfter = 3
	// burstGap is the time between two of the burst's pods.
	burstGap = 150 * time.Millisecond

	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = time.Second
	// takeoverSlack is the "few seconds" beyond the lease duration the
	// other manager may take to serve: acquiring the lease (retry period
	// and jitter), starting the leader's runnables and binding the port.
	takeoverSlack = 5 * time.Second
)

// logPath receives the managers' and client-go's logs.
var logPath string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	f, err := os.CreateTemp("", "failover-managers-*.log")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logPath = f.Name()
	logger := zap.New(zap.WriteTo(f))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	code := m.Run()
	_ = f.Close()
	if code == 0 {
		_ = os.Remove(logPath)
	} else {
		fmt.Fprintf(os.Stderr, "the managers' logs are in %s\n", logPath)
	}
	return code
}

// TestLeaderFailover runs two leader-elected managers in the sandbox, with
// a real kube-scheduler that reaches the extender through the Service's
// EndpointSlice, and stops the leader while a burst of pods is being
// scheduled: once gracefully (the lease is released on the way out), once
// after cutting it off from the API server first (the lease stays until it
// expires, as when its node dies). Either way the other manager must serve
// the extender within the lease duration and a few seconds and point the
// EndpointSlice at itself; every pod is scheduled, no node gets more pods'
// volumes than its disk holds, no ledger version is over its limit, and no
// granted reservation vanishes.
func TestLeaderFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and kube-scheduler")
	}
	for _, tt := range []struct {
		name string
		cut  bool
	}{
		{name: "the leader stops and releases its lease", cut: false},
		{name: "the leader is cut off from the API server and keeps its lease", cut: true},
	} {
		t.Run(tt.name, func(t *testing.T) { testFailover(t, tt.cut) })
	}
}

// member is one of the two managers.
type member struct {
	index int
	// name is the manager's NodeName: the EndpointSlice's nodeName and the
	// heartbeat's node label.
	name string
	// podIP is the address it advertises, as its pod IP.
	podIP string
	// extender and metrics are where it listens, on loopback.
	extender, metrics string
	cut               cutOff
	// clock is the member's manager's clock (its ledger, mirror and
	// extender, the extender's fence included).
	clock *heldClock
}

// endpoint is the extender's address as the EndpointSlice names it.
func (m *member) endpoint() string { return net.JoinHostPort(m.podIP, strconv.Itoa(extender.Port)) }

// configure is the member's sandbox.ManagerHook: the sandbox's loopback
// extender and metrics ports, and the member's pod IP, name and lease timings.
func (m *member) configure(opts *manager.Options, cfg *rest.Config) {
	opts.AdvertiseIP = m.podIP
	opts.NodeName = m.name
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = leaseDuration, renewDeadline, retryPeriod
	opts.Clock = m.clock
	m.extender, m.metrics = opts.ExtenderBindAddress, opts.MetricsBindAddress
	cfg.Wrap(m.cut.wrap)
}

// cutOff fails every API request of a manager once cut, as a network
// partition (or the death of its node) would.
type cutOff struct{ cut atomic.Bool }

func (c *cutOff) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if c.cut.Load() {
			return nil, errors.New("cut off from the API server by the test")
		}
		return rt.RoundTrip(req)
	})
}

// heldClock is a manager's clock that runs with the wall clock, stepped at
// a steady pace, except while the test holds it: a new leader's fence,
// measured on this clock, cannot end while the test looks at it. Once
// released it runs on, behind the wall clock by the time it was held.
type heldClock struct {
	*clocktesting.FakeClock
	held atomic.Bool
}

// runHeldClock starts a heldClock at the wall clock's time; it runs until
// the test ends.
func runHeldClock(t *testing.T) *heldClock {
	c := &heldClock{FakeClock: clocktesting.NewFakeClock(time.Now())}
	ticker := time.NewTicker(10 * time.Millisecond)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		defer ticker.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-ticker.C:
				if !c.held.Load() {
					c.Step(now.Sub(last))
				}
				last = now
			}
		}
	}()
	return c
}

// Hold stops the clock until Release.
func (c *heldClock) Hold() { c.held.Store(true) }

// Release lets the clock run on from where it was held.
func (c *heldClock) Release() { c.held.Store(false) }

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func testFailover(t *testing.T, cut bool) {
	ctx := context.Background()
	// Pod IPs from TEST-NET-1 (RFC 5737): never routed, and accepted in an
	// EndpointSlice, which refuses loopback addresses.
	members := []*member{
		{index: 0, name: "manager-a", podIP: "192.0.2.10", clock: runHeldClock(t)},
		{index: 1, name: "manager-b", podIP: "192.0.2.11", clock: runHeldClock(t)},
	}
	proxy, err := newLeaderProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)

	attach, err := startAttachDelay(attachLatency)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(attach.Close)

	topo, err := sandbox.ParseTopology([]byte(fourNodes))
	if err != nil {
		t.Fatal(err)
	}
	sb := sandboxtest.Start(t, sandboxtest.Options{Sandbox: sandbox.Options{
		Topology:    topo,
		Extender:    true,
		Managers:    []sandbox.ManagerHook{members[0].configure, members[1].configure},
		ExtenderURL: proxy.URL(),
	}})
	c := sb.Client()
	if err := attach.register(ctx, c); err != nil {
		t.Fatal(err)
	}
	network := map[string]string{}
	for _, m := range members {
		network[m.endpoint()] = m.extender
	}
	proxy.Serve(endpointResolver(c, network))

	wc, err := client.NewWithWatch(sb.AdminConfig(), client.Options{Scheme: sb.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ledgers, err := watchLedgers(ctx, wc, sandbox.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	watchStopped := false
	stopWatch := func() {
		if watchStopped {
			return
		}
		watchStopped = true
		versions, violations, err := ledgers.Stop()
		if err != nil {
			t.Error(err)
		}
		for _, v := range violations {
			t.Error(v)
		}
		if versions == 0 {
			t.Error("the ledger watch saw no DiskSchedule version")
		}
		t.Logf("checked %d DiskSchedule versions: %d violations", versions, len(violations))
	}
	t.Cleanup(stopWatch)

	// One manager leads: it alone serves the extender, the EndpointSlice
	// names it, and kube-scheduler reaches it through the proxy.
	// The extender's client certificate; the metrics are plain HTTP.
	hc, err := sb.ExtenderTLS().HTTPClient(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var leader *member
	testenv.Eventually(t, ctx, time.Minute, "one manager serves the extender and the EndpointSlice points at it", func(ctx context.Context) (bool, string, error) {
		var serving []*member
		for _, m := range members {
			if controlplane.Healthy(ctx, hc, "https://"+m.extender+"/healthz") {
				serving = append(serving, m)
			}
		}
		if len(serving) != 1 {
			return false, fmt.Sprintf("%d managers serve", len(serving)), nil
		}
		leader = serving[0]
		ok, state, err := endpointNames(ctx, c, leader)
		return ok && controlplane.Healthy(ctx, hc, proxy.URL()+"/healthz"), state, err
	})
	follower := members[1-leader.index]
	holder := leaseHolder(ctx, t, c)
	t.Logf("%s (%s, extender at %s) leads with lease holder %s; %s (%s, extender at %s) follows",
		leader.name, leader.podIP, leader.extender, holder, follower.name, follower.podIP, follower.extender)

	// The burst: every claim is provisioned first, then all pods are created at once.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "burst"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	for i := range podCount {
		if err := c.Create(ctx, claim(ns.Name, fmt.Sprintf("data-%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, ctx, time.Minute, "every claim is bound", func(ctx context.Context) (bool, string, error) {
		list := &corev1.PersistentVolumeClaimList{}
		if err := c.List(ctx, list, client.InNamespace(ns.Name)); err != nil {
			return false, "", err
		}
		bound := 0
		for _, pvc := range list.Items {
			if pvc.Status.Phase == corev1.ClaimBound && pvc.Spec.VolumeName != "" {
				bound++
			}
		}
		return bound == podCount, fmt.Sprintf("%d of %d bound", bound, podCount), nil
	})
	if err := attach.waitActive(ctx, c, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// The pods arrive one every burstGap, as a StatefulSet's or a job's
	// would: kube-scheduler places each within milliseconds, so the burst
	// lasts long enough for the leader to be stopped in the middle of it.
	burstStart := time.Now()
	created := make(chan error, 1)
	go func() {
		ticker := time.NewTicker(burstGap)
		defer ticker.Stop()
		for i := range podCount {
			if err := c.Create(ctx, pod(ns.Name, fmt.Sprintf("app-%02d", i), fmt.Sprintf("data-%02d", i))); err != nil {
				created <- err
				return
			}
			<-ticker.C
		}
		created <- nil
	}()
	t.Cleanup(func() {
		if err := <-created; err != nil {
			t.Errorf("creating the burst's pods: %v", err)
		}
	})

	// Stop the leader mid-burst, while it holds granted reservations.
	var boundAtStop int
	var granted map[reservationKey]dsv1.ReservationStatus
	testenv.Eventually(t, ctx, time.Minute, fmt.Sprintf("%d pods are bound and a reservation is granted", stopAfter), func(ctx context.Context) (bool, string, error) {
		pods, err := listPods(ctx, c, ns.Name)
		if err != nil {
			return false, "", err
		}
		boundAtStop = countBound(pods)
		granted = ledgers.Scheduled()
		if boundAtStop == podCount {
			_, delayed := attach.Counts()
			return false, "", fmt.Errorf("all %d pods were bound before the leader could be stopped mid-burst (%d reservations granted, %d attaches delayed by %s)",
				podCount, len(granted), delayed, attachLatency)
		}
		return boundAtStop >= stopAfter && len(granted) > 0, fmt.Sprintf("%d bound, %d reservations granted", boundAtStop, len(granted)), nil
	})
	// The follower's clock stands still until the test has seen its fence.
	follower.clock.Hold()
	t.Cleanup(follower.clock.Release)
	if cut {
		leader.cut.cut.Store(true)
	}
	stopAt := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- sb.StopManager(leader.index) }()
	t.Logf("stopping %s %s after the burst started, with %d of %d pods bound and %d reservations granted: %v",
		leader.name, time.Since(burstStart).Round(time.Millisecond), boundAtStop, podCount, len(granted), keys(granted))

	// The follower takes over within the lease duration and a few seconds.
	deadline := leaseDuration + takeoverSlack
	testenv.Eventually(t, ctx, deadline, fmt.Sprintf("%s serves the extender", follower.name), func(ctx context.Context) (bool, string, error) {
		return controlplane.Healthy(ctx, hc, "https://"+follower.extender+"/healthz"), "/healthz does not answer 200", nil
	})
	takeover := time.Since(stopAt)
	// The new leader fences: it answers no filter until the pods the old
	// one let through have bound (the fence is the manager's default, 10 s
	// on its clock, which stands still until the test has seen the fence,
	// then runs on).
	testenv.Eventually(t, ctx, deadline, fmt.Sprintf("%s reports its fence", follower.name), func(ctx context.Context) (bool, string, error) {
		v, err := metricSample(ctx, hc, follower.metrics, "longhorn_scheduler_extender_fenced")
		return v == 1, fmt.Sprintf("longhorn_scheduler_extender_fenced %v", v), err
	})
	follower.clock.Release()
	testenv.Eventually(t, ctx, deadline, fmt.Sprintf("the EndpointSlice points at %s", follower.name), func(ctx context.Context) (bool, string, error) {
		return endpointNames(ctx, c, follower)
	})
	endpointMoved := time.Since(stopAt)
	if endpointMoved > deadline {
		t.Errorf("the EndpointSlice named %s only %s after the stop, more than %s", follower.name, endpointMoved, deadline)
	}
	t.Logf("%s serves the extender %s after the stop and the EndpointSlice names it after %s (lease duration %s)",
		follower.name, takeover.Round(time.Millisecond), endpointMoved.Round(time.Millisecond), leaseDuration)
	select {
	case err := <-stopped:
		switch {
		case err != nil && !cut:
			t.Errorf("stopping %s: %v", leader.name, err)
		case err != nil:
			t.Logf("%s, cut off, stopped with: %v", leader.name, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s did not stop within a minute", leader.name)
	}
	if controlplane.Healthy(ctx, hc, "https://"+leader.extender+"/healthz") {
		t.Errorf("%s still serves the extender after it stopped", leader.name)
	}
	if now := leaseHolder(ctx, t, c); now == holder {
		t.Errorf("the lease is still held by %s", holder)
	}

	// Every pod is scheduled and running, no node has more than its disk holds.
	var pods []corev1.Pod
	testenv.Eventually(t, ctx, 2*time.Minute, "every pod is bound and running", func(ctx context.Context) (bool, string, error) {
		var err error
		if pods, err = listPods(ctx, c, ns.Name); err != nil {
			return false, "", err
		}
		running := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == podCount, fmt.Sprintf("%d bound, %d running of %d", countBound(pods), running, podCount), nil
	})
	t.Logf("every pod is running %s after the burst started", time.Since(burstStart).Round(time.Millisecond))
	perNode := map[string]int{}
	for _, p := range pods {
		perNode[p.Spec.NodeName]++
	}
	for node, n := range perNode {
		if n > podsPerNode {
			t.Errorf("node %s runs %d pods, but its disk holds the volumes of %d", node, n, podsPerNode)
		}
	}
	t.Logf("pods per node: %v", perNode)
	checkReplicas(ctx, t, c, pods)

	// The ledgers settle to exactly the replicas: every reservation granted
	// before the failover was handed over or expired, none vanished.
	testenv.Eventually(t, ctx, time.Minute, "the ledgers grant exactly the replicas", func(context.Context) (bool, string, error) {
		var total int64
		var held []string
		for name, ds := range ledgers.Latest() {
			total += ds.Status.StorageScheduled
			for v, r := range ds.Status.Reservations {
				if r.State == dsv1.ReservationStateScheduled {
					held = append(held, reservationKey{disk: name, volume: v}.String())
				}
			}
		}
		size := resource.MustParse(volumeSize)
		want := podCount * size.Value()
		return total == want && len(held) == 0, fmt.Sprintf("%d bytes granted (want %d), reservations still held: %v", total, want, held), nil
	})
	states := map[dsv1.ReservationState]int{}
	for k, before := range granted {
		now, ok := ledgers.Reservation(k)
		if !ok {
			t.Errorf("reservation %s (pod %s), granted before the failover, was never seen again", k, before.Pod)
			continue
		}
		states[now.State]++
		if now.State != dsv1.ReservationStateFulfilled && now.State != dsv1.ReservationStateExpired {
			t.Errorf("reservation %s (pod %s), granted before the failover, is %s: %s", k, before.Pod, now.State, now.Message)
		}
	}
	t.Logf("the %d reservations granted before the failover ended: %v", len(granted), states)
	if _, delayed := attach.Counts(); delayed < podCount {
		t.Errorf("%d attaches went through the attach-latency webhook, want at least %d", delayed, podCount)
	}
	stopWatch()

	// The new leader's heartbeat is 1, the old one's 0, and kube-scheduler
	// reached the new leader through the Service.
	beats, err := heartbeats(ctx, hc, follower.metrics)
	if err != nil {
		t.Fatal(err)
	}
	if beats[follower.name] != 1 || beats[leader.name] != 0 {
		t.Errorf("heartbeats %v, want %s=1 and %s=0", beats, follower.name, leader.name)
	}
	toFollower, failed := proxy.Forwarded(follower.extender)
	toLeader, _ := proxy.Forwarded(leader.extender)
	if toFollower == 0 {
		t.Errorf("kube-scheduler never reached %s through the extender Service", follower.name)
	}
	t.Logf("kube-scheduler's connections: %d to %s, %d to %s, %d found no ready endpoint",
		toLeader, leader.name, toFollower, follower.name, failed)
	select {
	case <-sb.Done():
		t.Errorf("a component of the sandbox stopped on its own: %v", sb.Err())
	default:
	}
}

// checkReplicas checks that every pod's volume has one replica, granted by
// its disk's ledger, and reports how many sit on their pod's node.
func checkReplicas(ctx context.Context, t *testing.T, c client.Client, pods []corev1.Pod) {
	t.Helper()
	replicas := &lhv1.ReplicaList{}
	if err := c.List(ctx, replicas, client.InNamespace(sandbox.Namespace)); err != nil {
		t.Fatal(err)
	}
	byVolume := map[string][]lhv1.Replica{}
	for _, r := range replicas.Items {
		byVolume[r.Spec.VolumeName] = append(byVolume[r.Spec.VolumeName], r)
	}
	local := 0
	for _, p := range pods {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName}, pvc); err != nil {
			t.Fatal(err)
		}
		reps := byVolume[pvc.Spec.VolumeName]
		if len(reps) != 1 {
			t.Errorf("volume %s of pod %s has %d replicas, want 1", pvc.Spec.VolumeName, p.Name, len(reps))
			continue
		}
		r := reps[0]
		ds := &dsv1.DiskSchedule{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: r.Spec.DiskID}, ds); err != nil {
			t.Fatal(err)
		}
		if st := ds.Status.Replicas[r.Name]; st.State != dsv1.RequestStateScheduled || st.ScheduledSize != r.Spec.VolumeSize {
			t.Errorf("replica %s of pod %s's volume is not granted on disk %s: %+v", r.Name, p.Name, r.Spec.DiskID, st)
		}
		if r.Spec.NodeID == p.Spec.NodeName {
			local++
		}
	}
	t.Logf("%d of %d pods have their replica on their own node", local, len(pods))
}

// endpointNames reports whether the extender's EndpointSlice names m.
func endpointNames(ctx context.Context, c client.Client, m *member) (bool, string, error) {
	slice := &discoveryv1.EndpointSlice{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: extender.ServiceName}, slice); err != nil {
		return false, "", client.IgnoreNotFound(err)
	}
	addr, err := sliceAddress(slice)
	if err != nil {
		return false, err.Error(), nil
	}
	node := ""
	if len(slice.Endpoints) > 0 && slice.Endpoints[0].NodeName != nil {
		node = *slice.Endpoints[0].NodeName
	}
	return addr == m.endpoint() && node == m.name, fmt.Sprintf("the EndpointSlice names %s on node %q", addr, node), nil
}

func leaseHolder(ctx context.Context, t *testing.T, c client.Client) string {
	t.Helper()
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: manager.DefaultLeaderElectionID}, lease); err != nil {
		t.Fatalf("getting the manager's lease: %v", err)
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// heartbeats reads longhorn_scheduler_extender_heartbeat by node from the
// metrics endpoint at addr.
func heartbeats(ctx context.Context, hc *http.Client, addr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the metrics: %w", err)
	}
	defer resp.Body.Close()
	const prefix = `longhorn_scheduler_extender_heartbeat{node="`
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		node, value, ok := strings.Cut(line, `"} `)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("parsing the heartbeat of %s: %w", node, err)
		}
		out[node] = v
	}
	return out, sc.Err()
}

// metricSample returns the value of the unlabelled sample name in the
// metrics at addr, or 0 when there is none.
func metricSample(ctx context.Context, hc *http.Client, addr, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("reading the metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if value, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(value, 64)
		}
	}
	return 0, sc.Err()
}

func claim(ns, name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(sandbox.StorageClassName),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse(volumeSize),
			}},
		},
	}
}

// pod returns a pod using claim that asks kube-scheduler for the extender.
func pod(ns, name, claim string) *corev1.Pod {
	one := corev1.ResourceList{simcluster.ExtendedResource: resource.MustParse("1")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "busybox",
				Resources:    corev1.ResourceRequirements{Requests: one, Limits: one},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}}},
		},
	}
}

func listPods(ctx context.Context, c client.Client, ns string) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func countBound(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

func keys(m map[reservationKey]dsv1.ReservationStatus) []string {
	var out []string
	for k := range m {
		out = append(out, k.String())
	}
	sort.Strings(out)
	return out
}
