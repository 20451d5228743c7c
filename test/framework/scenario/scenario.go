package scenario

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"

	"github.com/longhorn/diskschedule/internal/conditions"
)

// ExtendedResource is the extended resource a pod requests to be sent to
// the scheduler extender.
const ExtendedResource corev1.ResourceName = "longhorn.io/scheduler-extender"

// Defaults of Common.
const (
	DefaultSystemNamespace = "longhorn-system"
	DefaultStorageClass    = "longhorn"
	DefaultTimeout         = 2 * time.Minute
	// DefaultWaitForFirstConsumerClass is the race's class: the sandbox's
	// Longhorn class of WaitForFirstConsumer binding (one replica,
	// best-effort data locality).
	DefaultWaitForFirstConsumerClass = "longhorn-wffc"
)

// Common is what every scenario needs.
type Common struct {
	// Namespace is where the scenario creates its claims and pods; it is
	// created when missing. Required.
	Namespace string
	// SystemNamespace is Longhorn's namespace; "" is longhorn-system.
	SystemNamespace string
	// StorageClass is the class of the claims; "" is longhorn (one
	// replica, best-effort data locality in the sandbox).
	StorageClass string
	// Timeout bounds each wait; zero is two minutes.
	Timeout time.Duration
	// Scheduler is the pods' spec.schedulerName; empty leaves
	// kube-scheduler's default. SecondaryScheduler sends them to the second
	// scheduler, whose diskschedule plugin places them (it needs no
	// extender resource: leave the scenario's UseExtender false).
	Scheduler string
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
}

func (o Common) withDefaults() (Common, error) {
	if o.Namespace == "" {
		return o, errors.New("a scenario needs a namespace")
	}
	if o.SystemNamespace == "" {
		o.SystemNamespace = DefaultSystemNamespace
	}
	if o.StorageClass == "" {
		o.StorageClass = DefaultStorageClass
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o, nil
}

// Result is what happened to one set of pods, from their creation until
// every one ran (or a wait timed out).
type Result struct {
	// UseExtender is whether the pods requested the extender's resource.
	UseExtender bool
	// Nodes are the cluster's Longhorn nodes, by name.
	Nodes []string
	// PodNodes maps each pod to its node ("" when it got none).
	PodNodes map[string]string
	// PodsPerNode counts the pods on each node, every node included.
	PodsPerNode map[string]int
	// Unscheduled names the pods kube-scheduler gave no node within the
	// timeout, with why when it said.
	Unscheduled []string
	// NotRunning names the scheduled pods that were not Running within the
	// timeout (the data plane runs a pod once its volumes are attached to
	// its node and have a running replica).
	NotRunning []string
	// RemoteData names the pods with a volume that has no replica on the
	// pod's node once every volume settled: their data is read over the
	// network from another node.
	RemoteData []string
	// RemoteVolumes counts the volumes, of all pods, with no replica on
	// their pod's node once every volume settled.
	RemoteVolumes int
	// SurplusReplicas counts the placed replicas the volumes hold beyond
	// the number they want once every volume settled.
	SurplusReplicas int
	// TimeToAllScheduled is the time from the pods' creation until the
	// last one was seen bound to a node; 0 when one never was.
	TimeToAllScheduled time.Duration
	// TimeToAllRunning is the time from the pods' creation until the last
	// one was seen Running; 0 when one never was.
	TimeToAllRunning time.Duration
	// TimeToReady is, for pods of a StatefulSet, the time from the
	// StatefulSet's creation (or from the eviction that began its pods'
	// move) until it reported every replica ready; 0 when it did not within
	// the timeout, or for pods created by themselves.
	TimeToReady time.Duration
	// Ledgers are the disks' ledgers at the end, with what they decided
	// during the run.
	Ledgers []LedgerRow
	// LedgerVersions is how many DiskSchedule versions the ledger monitor
	// looked at during the run.
	LedgerVersions int
	// Violations describes every ledger version seen that broke the
	// ledger's invariant (storageScheduled over storageLimit, or not the
	// sum of its entries).
	Violations []string
	// OtherWork is what other apps' pods requested on each busy node while
	// the pods ran (the race's uneven nodes), by node; nil when none.
	OtherWork map[string]corev1.ResourceList
}

// OK reports whether every pod was scheduled and ran and no ledger broke
// its invariant: the run completed, whatever the distribution.
func (r Result) OK() bool {
	return len(r.Unscheduled) == 0 && len(r.NotRunning) == 0 && len(r.Violations) == 0
}

// Distribution returns the pods per node in node order, "4/4/4/4".
func (r Result) Distribution() string {
	parts := make([]string, 0, len(r.Nodes))
	for _, n := range r.Nodes {
		parts = append(parts, fmt.Sprint(r.PodsPerNode[n]))
	}
	return strings.Join(parts, "/")
}

// MaxPodsPerNode returns the most pods any one node got.
func (r Result) MaxPodsPerNode() int {
	most := 0
	for _, n := range r.PodsPerNode {
		most = max(most, n)
	}
	return most
}

// workload is a set of pods, each with its claims, created by themselves
// or by a StatefulSet.
type workload struct {
	o           Common
	c           client.WithWatch
	useExtender bool
	size        resource.Quantity
	// sts is whether a StatefulSet makes the pods.
	sts bool
	// stale are pods of the workload's names that are on their way out: a
	// wait for the pods does not count them.
	stale map[types.UID]bool
	// pods maps each pod name to its claims, in order.
	pods  map[string][]string
	names []string
}

// newWorkload describes n pods web-0 … web-(n-1) with claims claims per
// pod (data-web-i, or data-j-web-i when a pod has several).
func newWorkload(c client.WithWatch, o Common, n, claims int, size string, useExtender bool) (*workload, error) {
	q, err := resource.ParseQuantity(size)
	if err != nil {
		return nil, fmt.Errorf("volume size %q: %w", size, err)
	}
	if n < 1 || claims < 1 {
		return nil, fmt.Errorf("a workload needs at least one pod and one claim per pod, not %d and %d", n, claims)
	}
	w := &workload{o: o, c: c, useExtender: useExtender, size: q, pods: map[string][]string{}}
	for i := range n {
		pod := fmt.Sprintf("web-%d", i)
		w.names = append(w.names, pod)
		for j := range claims {
			if claims == 1 {
				w.pods[pod] = append(w.pods[pod], "data-"+pod)
			} else {
				w.pods[pod] = append(w.pods[pod], fmt.Sprintf("data-%d-%s", j, pod))
			}
		}
	}
	return w, nil
}

// schedulerName is the scheduler that places the workload's pods.
func (w *workload) schedulerName() string {
	if w.o.Scheduler == "" {
		return corev1.DefaultSchedulerName
	}
	return w.o.Scheduler
}

// claim returns a claim of the workload.
func (w *workload) claim(name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.o.Namespace, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(w.o.StorageClass),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: w.size}},
		},
	}
}

// pod returns a pod of the workload: a busybox container (never pulled:
// the sandbox has no kubelet) mounting each of its claims, requesting the
// extender's resource when the workload uses the extender, placed by
// Common.Scheduler when it is set.
func (w *workload) pod(name string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.o.Namespace, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "busybox", Command: []string{"sleep", "infinity"},
			}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	if w.useExtender {
		one := corev1.ResourceList{ExtendedResource: resource.MustParse("1")}
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: one, Limits: one}
	}
	pod.Spec.SchedulerName = w.o.Scheduler
	for i, claim := range w.pods[name] {
		vol := fmt.Sprintf("data-%d", i)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
		}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: vol, MountPath: "/" + vol})
	}
	return pod
}

// createClaims creates every claim at once and waits until each is bound
// to a provisioned volume.
func (w *workload) createClaims(ctx context.Context) error {
	if err := ensureNamespace(ctx, w.c, w.o.Namespace); err != nil {
		return err
	}
	var objs []client.Object
	want := map[string]bool{}
	for _, pod := range w.names {
		for _, claim := range w.pods[pod] {
			objs = append(objs, w.claim(claim))
			want[w.o.Namespace+"/"+claim] = true
		}
	}
	if err := createAll(ctx, w.c, objs); err != nil {
		return err
	}
	w.o.Logf("created %d claims of %s; waiting until they are bound", len(objs), w.size.String())
	var unbound []string
	err := waitFor(ctx, w.o.Timeout, w.c, &corev1.PersistentVolumeClaimList{}, w.o.Namespace, func(objs objects) bool {
		unbound = unbound[:0]
		for k := range want {
			pvc, ok := objs[k].(*corev1.PersistentVolumeClaim)
			if !ok || pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
				unbound = append(unbound, k)
			}
		}
		return len(unbound) == 0
	})
	if err != nil {
		sort.Strings(unbound)
		return fmt.Errorf("waiting until the claims are bound (still unbound: %s): %w", strings.Join(unbound, ", "), err)
	}
	return nil
}

// createPods creates every pod at once, by themselves (no controller makes
// them), and returns when the creation began.
func (w *workload) createPods(ctx context.Context) (time.Time, error) {
	objs := make([]client.Object, 0, len(w.names))
	for _, name := range w.names {
		objs = append(objs, w.pod(name))
	}
	start := time.Now()
	if err := createAll(ctx, w.c, objs); err != nil {
		return start, err
	}
	w.o.Logf("created %d pods at once (extender: %v, scheduler: %s); waiting for them to be scheduled", len(objs), w.useExtender, w.schedulerName())
	return start, nil
}

// createAll creates objs concurrently.
func createAll(ctx context.Context, c client.Client, objs []client.Object) error {
	errs := make([]error, len(objs))
	var wg sync.WaitGroup
	for i, obj := range objs {
		wg.Go(func() {
			if err := c.Create(ctx, obj); err != nil {
				errs[i] = fmt.Errorf("creating %s %s/%s: %w", kind(obj), obj.GetNamespace(), obj.GetName(), err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func kind(obj client.Object) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1.")
}

// ensureNamespace creates a namespace unless it exists.
func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// timedOut reports whether err is a wait's own timeout, not a failure or
// the caller's cancellation.
func timedOut(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded)
}

// waitFor observes list in namespace until check returns true or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, c client.WithWatch, list client.ObjectList, namespace string, check func(objects) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return observe(ctx, c, list, namespace, check)
}

// starter makes the workload's pods come (creating them, their
// StatefulSet, or evicting the ones it replaces) and returns when it began.
type starter func(context.Context) (time.Time, error)

// run starts the workload's pods with begin, waits until they are
// scheduled, Running (and, for a StatefulSet's pods, the StatefulSet ready)
// and their volumes settled, and reports the result, with the ledgers'
// decisions meanwhile. A pod that is not scheduled or not Running in time
// is reported in the result, not as an error.
func (w *workload) run(ctx context.Context, begin starter) (Result, error) {
	res := Result{UseExtender: w.useExtender, PodNodes: map[string]string{}, PodsPerNode: map[string]int{}}
	nodes, err := longhornNodes(ctx, w.c, w.o.SystemNamespace)
	if err != nil {
		return res, err
	}
	res.Nodes = nodes
	for _, n := range nodes {
		res.PodsPerNode[n] = 0
	}
	mon, err := startLedgerMonitor(ctx, w.c, w.o.SystemNamespace)
	if err != nil {
		return res, err
	}
	runErr := w.runPods(ctx, begin, &res)
	rows, versions, violations, err := mon.stop(ctx)
	res.Ledgers, res.LedgerVersions, res.Violations = rows, versions, violations
	return res, errors.Join(runErr, err)
}

func (w *workload) runPods(ctx context.Context, begin starter, res *Result) error {
	start, err := begin(ctx)
	if err != nil {
		return err
	}
	pods := map[string]*corev1.Pod{}
	// waitPods waits until done holds for every pod and returns how long
	// after start it first did, as the watch saw it.
	waitPods := func(done func(*corev1.Pod) bool) (time.Duration, error) {
		var took time.Duration
		err := waitFor(ctx, w.o.Timeout, w.c, &corev1.PodList{}, w.o.Namespace, func(objs objects) bool {
			all := true
			for _, name := range w.names {
				pod, ok := objs[w.o.Namespace+"/"+name].(*corev1.Pod)
				ok = ok && !w.stale[pod.UID]
				if ok {
					pods[name] = pod
				}
				all = all && ok && done(pod)
			}
			if all {
				took = time.Since(start)
			}
			return all
		})
		if timedOut(ctx, err) {
			err = nil // reported in the result
		}
		return took, err
	}
	res.TimeToAllScheduled, err = waitPods(func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	if err != nil {
		return err
	}
	for _, name := range w.names {
		pod := pods[name]
		if pod == nil || pod.Spec.NodeName == "" {
			res.Unscheduled = append(res.Unscheduled, name+unschedulableReason(pod))
			continue
		}
		res.PodNodes[name] = pod.Spec.NodeName
		res.PodsPerNode[pod.Spec.NodeName]++
	}
	if len(res.Unscheduled) > 0 {
		w.o.Logf("%d of %d pods got no node within %s", len(res.Unscheduled), len(w.names), w.o.Timeout)
		return nil
	}
	w.o.Logf("every pod has a node after %s: %s; waiting until they run", round(res.TimeToAllScheduled), w.distribution(res))

	res.TimeToAllRunning, err = waitPods(func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if err != nil {
		return err
	}
	for _, name := range w.names {
		if pod := pods[name]; pod == nil || pod.Status.Phase != corev1.PodRunning {
			res.NotRunning = append(res.NotRunning, name)
		}
	}
	if len(res.NotRunning) > 0 {
		w.o.Logf("%d of %d pods were not Running within %s", len(res.NotRunning), len(w.names), w.o.Timeout)
		return nil
	}
	w.o.Logf("every pod runs after %s", round(res.TimeToAllRunning))
	if w.sts {
		if res.TimeToReady, err = w.statefulSetReady(ctx, start); err != nil {
			return err
		}
		w.o.Logf("StatefulSet %s ready after %s", statefulSetName, round(res.TimeToReady))
	}
	w.o.Logf("waiting until the volumes settle")
	res.RemoteData, res.RemoteVolumes, res.SurplusReplicas, err = w.settle(ctx, res.PodNodes)
	return err
}

// distribution formats the pods per node of res, "node-1 4, node-2 4".
func (w *workload) distribution(res *Result) string {
	parts := make([]string, 0, len(res.Nodes))
	for _, n := range res.Nodes {
		parts = append(parts, fmt.Sprintf("%s %d", n, res.PodsPerNode[n]))
	}
	return strings.Join(parts, ", ")
}

// unschedulableReason returns kube-scheduler's reason for a pod it did not
// schedule, as ": message", or "".
func unschedulableReason(pod *corev1.Pod) string {
	if pod == nil {
		return ": not found"
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			return ": " + c.Message
		}
	}
	return ""
}

// settle waits until every volume of the workload is settled (see
// unsettled) and every ledger decided, and returns the pods with a volume
// that has no replica on the pod's node, how many such volumes there are,
// and how many replicas the volumes hold beyond the number they want.
func (w *workload) settle(ctx context.Context, podNodes map[string]string) ([]string, int, int, error) {
	volumes := map[string][]string{} // pod → its volumes
	for _, pod := range w.names {
		for _, claim := range w.pods[pod] {
			pvc := &corev1.PersistentVolumeClaim{}
			if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.o.Namespace, Name: claim}, pvc); err != nil {
				return nil, 0, 0, fmt.Errorf("getting claim %s: %w", claim, err)
			}
			pv := &corev1.PersistentVolume{}
			if err := w.c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
				return nil, 0, 0, fmt.Errorf("getting PersistentVolume %s: %w", pvc.Spec.VolumeName, err)
			}
			if pv.Spec.CSI != nil {
				volumes[pod] = append(volumes[pod], pv.Spec.CSI.VolumeHandle)
			}
		}
	}
	var vols, reps objects
	err := waitAll(ctx, w.o.Timeout, w.c, []watched{
		{&lhv1.VolumeList{}, w.o.SystemNamespace},
		{&lhv1.ReplicaList{}, w.o.SystemNamespace},
		{&dsv1.DiskScheduleList{}, w.o.SystemNamespace},
	}, func(objs []objects) (bool, string) {
		ledgers := objs[2]
		vols, reps = objs[0], objs[1]
		for _, pod := range w.names {
			for _, name := range volumes[pod] {
				v, ok := vols[w.o.SystemNamespace+"/"+name].(*lhv1.Volume)
				if !ok {
					return false, "volume " + name + " not found"
				}
				if why := unsettled(v, replicasOf(reps, name), ledgers); why != "" {
					return false, fmt.Sprintf("volume %s of pod %s: %s", name, pod, why)
				}
			}
		}
		for _, obj := range ledgers {
			ds := obj.(*dsv1.DiskSchedule)
			if ds.Status.ObservedGeneration != ds.Generation {
				return false, fmt.Sprintf("DiskSchedule %s has undecided requests", ds.Name)
			}
			if why := heldWithoutReplica(ds, reps); why != "" {
				return false, why
			}
		}
		return true, ""
	})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("waiting until the volumes settle: %w", err)
	}
	var remotePods []string
	remoteVolumes, surplus := 0, 0
	for _, pod := range w.names {
		remote := 0
		for _, name := range volumes[pod] {
			local, placed := false, 0
			want := vols[w.o.SystemNamespace+"/"+name].(*lhv1.Volume).Spec.NumberOfReplicas
			for _, r := range replicasOf(reps, name) {
				if r.Spec.DiskID != "" {
					placed++
					local = local || r.Spec.NodeID == podNodes[pod]
				}
			}
			if !local {
				remote++
			}
			surplus += max(placed-want, 0)
		}
		if remote > 0 {
			remotePods = append(remotePods, pod)
		}
		remoteVolumes += remote
	}
	return remotePods, remoteVolumes, surplus, nil
}

// heldWithoutReplica says which replica a ledger still grants although
// Longhorn no longer has it on the ledger's disk (removed, or elsewhere), or
// "": the mirror releases such entries (DESIGN §3.2 rule 10), and a settled
// ledger holds exactly what Longhorn persisted.
func heldWithoutReplica(ds *dsv1.DiskSchedule, reps objects) string {
	for name, st := range ds.Status.Replicas {
		if st.State != dsv1.RequestStateScheduled {
			continue
		}
		r, ok := reps[ds.Namespace+"/"+name].(*lhv1.Replica)
		if !ok || r.Spec.DiskID != ds.Name {
			return fmt.Sprintf("DiskSchedule %s (disk %s of node %s) still grants replica %s, which Longhorn no longer has there",
				ds.Name, ds.Spec.Name, ds.Spec.NodeID, name)
		}
	}
	return ""
}

// replicasOf returns the replicas of a volume among objs, those being
// deleted included.
func replicasOf(objs objects, volume string) []*lhv1.Replica {
	var out []*lhv1.Replica
	for _, o := range objs {
		if r := o.(*lhv1.Replica); r.Spec.VolumeName == volume {
			out = append(out, r)
		}
	}
	return out
}

// unsettled says why a volume is not settled yet, or "". A volume is
// settled when Longhorn's volume controller has reported its Scheduled
// condition, no replica of it is being deleted, every placed replica is
// granted by its disk's ledger, running and marked healthy, no surplus
// replica waits for removal next to a local one, and an unplaced replica
// (one kept for data locality where its node has no room) has been
// reported unschedulable.
//
// Longhorn marks a replica healthy (spec.healthyAt) once its engine has
// reported it RW (longhorn-manager v1.12.0 controller/volume_controller.go,
// ReconcileEngineReplicaState, line 869), which its engine monitor learns at
// its first poll, EnginePollInterval (5 s) after the engine started
// (controller/engine_controller.go, lines 58 and 955): the volume is
// attached and its pod runs before that. Until then Longhorn holds the
// replica for one that never held data: a drain of its node does not wait
// for it (controller/instance_manager_controller.go,
// canDeleteInstanceManagerPDB, line 1454), and the volume cannot be
// salvaged from it (controller/volume_controller.go, line 1841).
func unsettled(v *lhv1.Volume, replicas []*lhv1.Replica, ledgers objects) string {
	sched, _ := conditions.Longhorn(v.Status.Conditions, lhv1.VolumeConditionTypeScheduled)
	if sched.Status == "" {
		return "the volume controller has not reported the Scheduled condition yet"
	}
	placed, unplaced, local := 0, 0, false
	for _, r := range replicas {
		switch {
		case !r.DeletionTimestamp.IsZero():
			return fmt.Sprintf("replica %s is being deleted", r.Name)
		case r.Spec.DiskID == "":
			unplaced++
			continue
		}
		placed++
		local = local || r.Spec.NodeID == v.Spec.NodeID
		ds, ok := ledgers[r.Namespace+"/"+r.Spec.DiskID].(*dsv1.DiskSchedule)
		if !ok {
			return fmt.Sprintf("replica %s: DiskSchedule %s not found", r.Name, r.Spec.DiskID)
		}
		if st, ok := ds.Status.Replicas[r.Name]; !ok || st.State != dsv1.RequestStateScheduled || st.ScheduledSize != r.Spec.VolumeSize {
			return fmt.Sprintf("replica %s is not granted on disk %s of node %s yet", r.Name, ds.Spec.Name, ds.Spec.NodeID)
		}
		if r.Status.CurrentState != lhv1.InstanceStateRunning {
			return fmt.Sprintf("replica %s is %q", r.Name, r.Status.CurrentState)
		}
		if r.Spec.HealthyAt == "" {
			return fmt.Sprintf("replica %s runs but its engine has not reported it healthy yet", r.Name)
		}
	}
	if why := noLocalReplicaYet(v, replicas); why != "" {
		return why
	}
	switch {
	case local && placed > v.Spec.NumberOfReplicas:
		return fmt.Sprintf("%d replicas placed, wants %d: a surplus one is to be removed", placed, v.Spec.NumberOfReplicas)
	case unplaced > 0 && (sched.Status != lhv1.ConditionStatusFalse || sched.Reason == ""):
		return fmt.Sprintf("%d replicas not placed yet", unplaced)
	case unplaced == 0 && placed < v.Spec.NumberOfReplicas:
		return fmt.Sprintf("%d replicas placed, wants %d", placed, v.Spec.NumberOfReplicas)
	}
	return ""
}

// noLocalReplicaYet says why an attached best-effort volume waits for a
// replica on its node, or "". Once such a volume is healthy with no
// replica on its engine's node, placed or asked for there
// (spec.hardNodeAffinity), Longhorn's volume controller creates one
// (longhorn-manager v1.12.0 controller/volume_controller.go, lines 948-953,
// hasLocalReplicaOnSameNodeAsEngine): until then the volume looks settled
// with its replicas elsewhere, as it does after its pod moved.
func noLocalReplicaYet(v *lhv1.Volume, replicas []*lhv1.Replica) string {
	node := v.Status.CurrentNodeID
	if v.Spec.DataLocality != lhv1.DataLocalityBestEffort || v.Status.State != lhv1.VolumeStateAttached ||
		v.Status.FrontendDisabled || node == "" {
		return ""
	}
	for _, r := range replicas {
		if r.Spec.NodeID == node || r.Spec.HardNodeAffinity == node {
			return ""
		}
	}
	return fmt.Sprintf("attached on %s with no replica there yet (best-effort data locality)", node)
}

// longhornNodes returns the names of the Longhorn nodes, sorted.
func longhornNodes(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	list := &lhv1.NodeList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing the Longhorn nodes: %w", err)
	}
	names := make([]string, 0, len(list.Items))
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	return names, nil
}

// round rounds a duration for people.
func round(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
