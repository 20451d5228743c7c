package extender

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/clusterview"
	"github.com/longhorn/diskschedule/internal/ledgerclient"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/settings"
)

// volumeLabel is the label Longhorn puts on each Replica with its volume's
// name (longhorn-manager's types.LonghornLabelVolume). The API server can
// select by it; the cache looks replicas up by index.ReplicaByVolume.
const volumeLabel = "longhornvolume"

// decisionTimeout bounds how long the extender waits for the ledgers to
// decide a pod's reservations before it lets the next pod through.
const decisionTimeout = 10 * time.Second

// Extender decides, for kube-scheduler, which nodes can hold a pod's volumes.
type Extender struct {
	client    client.Client
	apiReader client.Reader
	namespace string
	clock     clock.PassiveClock
	metrics   *metrics.Extender
	budget    int
	resolver  resolver
	settings  *liveSettings

	// mu serializes decisions, so each reads the reservations of the one before.
	mu sync.Mutex
	// hold is the pod whose node is not known yet; other pods' filters wait for it.
	hold *hold
	// background bounds the goroutines that follow held pods.
	background context.Context
}

// hold is a filtered pod that needs new space, waiting for its node.
type hold struct {
	pod  types.NamespacedName
	uid  types.UID
	fits map[string]fit
	done chan struct{}
}

// New returns an Extender reading through c (a cached client) and writing
// reservations with apiReader-checked read-modify-writes. budget bounds the
// packing search per node.
func New(c client.Client, apiReader client.Reader, namespace string, clk clock.PassiveClock,
	m *metrics.Extender, budget int) *Extender {
	return &Extender{
		client: c, apiReader: apiReader, namespace: namespace, clock: clk, metrics: m, budget: budget,
		resolver: resolver{client: c, namespace: namespace}, settings: newLiveSettings(c, namespace),
		background: context.Background(),
	}
}

// Filter returns the candidate nodes that can hold the pod's volumes and,
// for the others, why not.
func (e *Extender) Filter(ctx context.Context, pod *corev1.Pod, candidates []string) ([]string, map[string]string, error) {
	if err := e.lockAfterHold(ctx, pod); err != nil {
		return nil, nil, err
	}
	defer e.mu.Unlock()

	sched, err := e.settings.get(ctx)
	if err != nil {
		return nil, nil, err
	}
	vols, err := e.resolver.podVolumes(ctx, pod)
	if err != nil {
		return nil, nil, err
	}
	if len(vols) == 0 {
		return candidates, nil, nil
	}
	if node := restartNode(vols, candidates); node != "" {
		failed := map[string]string{}
		for _, c := range candidates {
			if c != node {
				failed[c] = fmt.Sprintf("node %s already holds a replica of every volume of the pod", node)
			}
		}
		return []string{node}, failed, nil
	}
	fits, err := e.evaluateAll(ctx, pod, vols, candidates, sched)
	if err != nil {
		return nil, nil, err
	}
	var passed []string
	failed := map[string]string{}
	for _, name := range candidates {
		if f := fits[name]; f.OK {
			passed = append(passed, name)
		} else {
			failed[name] = f.Reason
		}
	}
	if len(passed) > 0 && sched.PodSchedulingTimeout > 0 {
		e.holdFor(pod, fits, sched)
	}
	return passed, failed, nil
}

// Prioritize scores the candidate nodes 0–10: the node holding replicas of
// every volume scores highest, then nodes with the most space left after
// placing the pod's volumes.
func (e *Extender) Prioritize(ctx context.Context, pod *corev1.Pod, candidates []string) (map[string]int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	scores := map[string]int64{}
	sched, err := e.settings.get(ctx)
	if err != nil {
		return nil, err
	}
	vols, err := e.resolver.podVolumes(ctx, pod)
	if err != nil {
		return nil, err
	}
	if len(vols) == 0 {
		return scores, nil
	}
	if node := restartNode(vols, candidates); node != "" {
		scores[node] = 10
		return scores, nil
	}
	fits, err := e.evaluateAll(ctx, pod, vols, candidates, sched)
	if err != nil {
		return nil, err
	}
	var most int64
	for _, f := range fits {
		if f.OK && f.Free > most {
			most = f.Free
		}
	}
	for name, f := range fits {
		if f.OK && most > 0 {
			scores[name] = 1 + f.Free*8/most
		}
		for _, v := range vols {
			if f.OK && v.ReplicaNodes[name] {
				scores[name] = min(scores[name]+1, 10)
			}
		}
	}
	return scores, nil
}

// lockAfterHold takes the decision lock once no other pod is held.
func (e *Extender) lockAfterHold(ctx context.Context, pod *corev1.Pod) error {
	for {
		e.mu.Lock()
		h := e.hold
		if h == nil || h.uid == pod.UID {
			return nil
		}
		e.mu.Unlock()
		select {
		case <-h.done:
		case <-ctx.Done():
			return fmt.Errorf("waiting for pod %s to be scheduled: %w", h.pod, ctx.Err())
		}
	}
}

// evaluateAll evaluates every candidate node from the cached Longhorn Nodes
// and ledgers.
func (e *Extender) evaluateAll(ctx context.Context, pod *corev1.Pod, vols []podVolume, candidates []string, sched settings.Scheduling) (map[string]fit, error) {
	// The lists are only read: skipping the cache's deep copy keeps a filter
	// over thousands of nodes cheap.
	view, err := clusterview.Load(ctx, e.client, e.namespace, client.UnsafeDisableDeepCopy)
	if err != nil {
		return nil, err
	}
	byNode := make(map[string]*lhv1.Node, len(view.Nodes))
	for i := range view.Nodes {
		byNode[view.Nodes[i].Name] = &view.Nodes[i]
	}
	ledgersByNode := map[string]map[string]*dsv1.DiskSchedule{}
	for uuid, ds := range view.Ledgers {
		if ledgersByNode[ds.Spec.NodeID] == nil {
			ledgersByNode[ds.Spec.NodeID] = map[string]*dsv1.DiskSchedule{}
		}
		ledgersByNode[ds.Spec.NodeID][uuid] = ds
	}
	podKey := pod.Namespace + "/" + pod.Name
	fits := make(map[string]fit, len(candidates))
	for _, name := range candidates {
		f := evaluate(vols, byNode[name], ledgersByNode[name], sched, podKey, e.budget)
		if f.Steps > 0 {
			e.metrics.PackingSteps.Observe(float64(f.Steps))
			if !f.Exact {
				e.metrics.PackingFallbacks.Inc()
			}
		}
		fits[name] = f
	}
	return fits, nil
}

// holdFor makes later filters of other pods wait until pod's node is known
// and its reservations are written. Called with e.mu held.
func (e *Extender) holdFor(pod *corev1.Pod, fits map[string]fit, sched settings.Scheduling) {
	needsSpace := false
	for _, f := range fits {
		if f.OK && len(f.Assignment) > 0 {
			needsSpace = true
		}
	}
	if !needsSpace {
		return
	}
	if e.hold != nil && e.hold.uid == pod.UID {
		e.hold.fits = fits // a new scheduling cycle of the same pod
		return
	}
	h := &hold{pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, uid: pod.UID, fits: fits, done: make(chan struct{})}
	e.hold = h
	go e.follow(h, sched)
}

// follow waits for the held pod's node, reserves its volumes' space on that
// node's ledgers, waits for the decisions, and releases the hold.
func (e *Extender) follow(h *hold, sched settings.Scheduling) {
	ctx := e.background
	log := ctrl.LoggerFrom(ctx).WithValues("pod", h.pod)
	defer e.release(h)

	start := e.clock.Now()
	node := e.waitForNode(ctx, h, sched.PodSchedulingTimeout)
	e.metrics.PodSchedulingWait.WithLabelValues(fmt.Sprint(node != "")).Observe(e.clock.Since(start).Seconds())
	if node == "" {
		return
	}
	e.mu.Lock()
	f := h.fits[node]
	e.mu.Unlock()
	if !f.OK || len(f.Assignment) == 0 {
		return
	}
	start = e.clock.Now()
	granted, err := e.reserve(ctx, h, f)
	if err != nil {
		log.Error(err, "Reserving space for the pod's volumes", "node", node)
	}
	e.metrics.NodeReservation.WithLabelValues(fmt.Sprint(granted)).Observe(e.clock.Since(start).Seconds())
}

// waitForNode returns the node the held pod was bound to, or "" when it was
// not bound within timeout or is gone.
func (e *Extender) waitForNode(ctx context.Context, h *hold, timeout time.Duration) string {
	node := ""
	_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pod := &corev1.Pod{}
		if err := e.client.Get(ctx, h.pod, pod); err != nil {
			return apierrors.IsNotFound(err), nil
		}
		if pod.UID != h.uid {
			return true, nil
		}
		node = pod.Spec.NodeName
		return node != "", nil
	})
	return node
}

// reserve writes a reservation for each volume of the pod on the disk it was
// packed onto, then waits until every one is decided and the cache has seen
// the decisions, so the next filter reads them. It reports whether all were granted.
func (e *Extender) reserve(ctx context.Context, h *hold, f fit) (bool, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("pod", h.pod)
	podKey := h.pod.Namespace + "/" + h.pod.Name
	volumes := make([]string, 0, len(f.Assignment))
	for v := range f.Assignment {
		volumes = append(volumes, v)
	}
	sort.Strings(volumes)
	var reserved []string
	// placed maps each replica the volume controller put on the node first
	// to its disk: its request, not a reservation, holds the volume's space.
	placed := map[string]string{}
	for _, v := range volumes {
		rep, err := e.replicaOn(ctx, v, f.Assignment[v])
		if err != nil {
			return false, err
		}
		if rep != nil {
			if rep.Spec.DiskID != "" {
				placed[rep.Name] = rep.Spec.DiskID
			}
			continue // the volume controller placed a replica there first: nothing to reserve
		}
		key := types.NamespacedName{Namespace: e.namespace, Name: f.Assignment[v]}
		size := f.Sizes[v]
		if err := e.clearSpentReservation(ctx, key, v, size, podKey); err != nil {
			return false, err
		}
		var requested *lhv1.Replica
		var checkErr error
		_, err = ledgerclient.Mutate(ctx, e.apiReader, e.client, key, func(ds *dsv1.DiskSchedule) bool {
			want := dsv1.DiskScheduleReservation{Size: size, Pod: podKey}
			if cur, ok := ds.Spec.Reservations[v]; ok && cur.Size == want.Size && cur.Pod == want.Pod {
				return false
			}
			// The volume controller may have placed a replica on this node
			// since replicaOn looked. It writes the Replica before the
			// request, so a request in this very version of the ledger, which
			// the write below is conditional on, shows in a fresh list: a
			// reservation next to it would charge the volume twice until it
			// expired.
			requested, checkErr = e.replicaPlaced(ctx, ds, v)
			if requested != nil || checkErr != nil {
				return false
			}
			if ds.Spec.Reservations == nil {
				ds.Spec.Reservations = map[string]dsv1.DiskScheduleReservation{}
			}
			ds.Spec.Reservations[v] = want
			return true
		})
		if err != nil {
			return false, err
		}
		if checkErr != nil {
			return false, checkErr
		}
		if requested != nil {
			if requested.Spec.DiskID != "" {
				placed[requested.Name] = requested.Spec.DiskID
			}
			continue
		}
		reserved = append(reserved, v)
	}
	// The next filter reads the cache: it must see the replicas' requests
	// as it would have seen the reservations.
	if err := e.waitRequestsCached(ctx, placed); err != nil {
		return false, err
	}
	allGranted := true
	for _, v := range reserved {
		key := types.NamespacedName{Namespace: e.namespace, Name: f.Assignment[v]}
		state, err := e.waitDecided(ctx, key, v, podKey)
		switch {
		case err != nil:
			e.metrics.Reservations.WithLabelValues("undecided").Inc()
			allGranted = false
			log.Error(err, "Waiting for a reservation's decision", "volume", v, "diskSchedule", key.Name)
		case state == dsv1.ReservationStateRejected:
			e.metrics.Reservations.WithLabelValues("rejected").Inc()
			allGranted = false
			log.Info("Reservation rejected: another request won the space; the pod stays where kube-scheduler put it",
				"volume", v, "diskSchedule", key.Name)
		default:
			e.metrics.Reservations.WithLabelValues("granted").Inc()
		}
	}
	return allGranted, nil
}

// clearSpentReservation removes an expired, fulfilled or rejected
// reservation for volume that has the same size and pod as the one about to
// be written, and waits until the ledger has dropped its decision: written
// again unchanged, it would keep that old decision.
func (e *Extender) clearSpentReservation(ctx context.Context, key types.NamespacedName, volume string, size int64, pod string) error {
	ds := &dsv1.DiskSchedule{}
	if err := e.apiReader.Get(ctx, key, ds); err != nil {
		return client.IgnoreNotFound(err)
	}
	res := ds.Spec.Reservations[volume]
	state, decided := reservationDecision(ds, volume)
	if !decided || res.Size != size || res.Pod != pod || state == dsv1.ReservationStateScheduled {
		return nil
	}
	if _, err := ledgerclient.Mutate(ctx, e.apiReader, e.client, key, func(ds *dsv1.DiskSchedule) bool {
		if _, ok := ds.Spec.Reservations[volume]; !ok {
			return false
		}
		delete(ds.Spec.Reservations, volume)
		return true
	}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, decisionTimeout, true, func(ctx context.Context) (bool, error) {
		if err := e.apiReader.Get(ctx, key, ds); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		_, still := ds.Status.Reservations[volume]
		return !still, nil
	})
}

// replicaPlaced returns a replica of volume placed on ds's node, listed
// from the API server after ds was read, or nil.
func (e *Extender) replicaPlaced(ctx context.Context, ds *dsv1.DiskSchedule, volume string) (*lhv1.Replica, error) {
	replicas := &lhv1.ReplicaList{}
	if err := e.apiReader.List(ctx, replicas, client.InNamespace(e.namespace), client.MatchingLabels{volumeLabel: volume}); err != nil {
		return nil, fmt.Errorf("listing the replicas of volume %s: %w", volume, err)
	}
	for i := range replicas.Items {
		rep := &replicas.Items[i]
		if rep.Spec.VolumeName == volume && rep.Spec.NodeID == ds.Spec.NodeID {
			return rep, nil
		}
	}
	return nil, nil
}

// replicaOn returns a replica of volume placed on the disk's node, read
// from the API server, or nil.
func (e *Extender) replicaOn(ctx context.Context, volume, diskUUID string) (*lhv1.Replica, error) {
	ds := &dsv1.DiskSchedule{}
	if err := e.apiReader.Get(ctx, types.NamespacedName{Namespace: e.namespace, Name: diskUUID}, ds); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return e.replicaPlaced(ctx, ds, volume)
}

// waitRequestsCached waits until the cache shows each replica's request in
// its disk's ledger (replica name → disk UUID), or the replica no longer
// asks for space there: the volume controller writes the request right
// after placing the replica, and removes it when the ledger rejects it.
func (e *Extender) waitRequestsCached(ctx context.Context, replicas map[string]string) error {
	if len(replicas) == 0 {
		return nil
	}
	requested := func(r client.Reader, disk, replica string) (bool, error) {
		ds := &dsv1.DiskSchedule{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: e.namespace, Name: disk}, ds); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		_, ok := ds.Spec.Replicas[replica]
		return ok, nil
	}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, decisionTimeout, true, func(ctx context.Context) (bool, error) {
		for replica, disk := range replicas {
			inCache, err := requested(e.client, disk, replica)
			if err != nil {
				return false, err
			}
			if inCache {
				continue
			}
			// Not in the cache: done only if the replica no longer asks there.
			if inAPI, err := requested(e.apiReader, disk, replica); err != nil || inAPI {
				return false, err
			}
			rep := &lhv1.Replica{}
			if err := e.apiReader.Get(ctx, types.NamespacedName{Namespace: e.namespace, Name: replica}, rep); client.IgnoreNotFound(err) != nil {
				return false, err
			} else if err == nil && rep.DeletionTimestamp.IsZero() && rep.Spec.DiskID == disk {
				return false, nil // placed there; its request is on its way
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting until the cache sees the requests of replicas %v: %w", replicas, err)
	}
	return nil
}

// waitDecided waits until the ledger key has decided the reservation of
// volume for pod, as read both from the API server and from the cache.
func (e *Extender) waitDecided(ctx context.Context, key types.NamespacedName, volume, pod string) (dsv1.ReservationState, error) {
	var state dsv1.ReservationState
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, decisionTimeout, true, func(ctx context.Context) (bool, error) {
		for _, r := range []client.Reader{e.apiReader, e.client} {
			ds := &dsv1.DiskSchedule{}
			if err := r.Get(ctx, key, ds); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			st, decided := reservationDecision(ds, volume)
			if !decided || ds.Spec.Reservations[volume].Pod != pod {
				return false, nil
			}
			state = st
		}
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("waiting for DiskSchedule %s to decide the reservation of volume %s: %w", key.Name, volume, err)
	}
	return state, nil
}

// reservationDecision returns the state ds decided for volume's reservation
// as it is written now (same size, same pod), and false while it is not
// decided or not requested. The ledger package reads replica and
// backing-image requests (ledger.ReplicaDecision); reservations, which only
// the extender writes and waits for, are read here.
func reservationDecision(ds *dsv1.DiskSchedule, volume string) (dsv1.ReservationState, bool) {
	res, inSpec := ds.Spec.Reservations[volume]
	st, decided := ds.Status.Reservations[volume]
	if !inSpec || !decided || st.RequestedSize != res.Size || st.Pod != res.Pod {
		return "", false
	}
	return st.State, true
}

// release ends the hold, letting waiting filters go on.
func (e *Extender) release(h *hold) {
	e.mu.Lock()
	if e.hold == h {
		e.hold = nil
	}
	e.mu.Unlock()
	close(h.done)
	ctrl.LoggerFrom(e.background).V(1).Info("Released the scheduling hold", "pod", klog.KRef(h.pod.Namespace, h.pod.Name))
}
