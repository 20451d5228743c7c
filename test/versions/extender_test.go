package versions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/extender"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/test/framework/extendertls"
	"github.com/longhorn/diskschedule/test/framework/managertest"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/controlplane"
)

// extenderNodes are the nodes of the extender's view, in kube-scheduler's
// candidate order.
var extenderNodes = []string{"ext-1", "ext-2", "ext-3", "ext-4"}

// claimCase is one pod of the extender's view: its one claim, bound to a
// Longhorn volume shaped as the case says, and the verdict the extender
// must give on every release.
type claimCase struct {
	pod  string
	size int64
	// replicas and locality are the volume's spec.numberOfReplicas and
	// spec.dataLocality; rwx makes it spec.accessMode rwx (and the claim
	// and PV ReadWriteMany).
	replicas int
	locality lhv1.DataLocality
	rwx      bool
	// on is the node of the volume's one placed replica, healthy and
	// running there ("": its replica is not placed yet).
	on string
	// passed are the nodes the filter returns; reasons holds words of
	// each failed node's reason.
	passed  []string
	reasons map[string][]string
	// scored are the nodes the prioritizer scores above 0, highest first
	// (nil: none).
	scored []string
}

// extenderCases are the pods of the extender's view. The disks, of 100Gi
// each, limit 200Gi at 200% over-provisioning: ext-1 holds the 10Gi
// replica of pod pinned's volume (190Gi free); ext-2 holds two replicas
// Longhorn persisted, 150Gi and the 10Gi of pod restarted's volume (40Gi
// free); ext-3's Longhorn node is not Ready; ext-4's is cordoned.
var extenderCases = []claimCase{
	{pod: "local", size: 60 * gi, replicas: 1, locality: lhv1.DataLocalityBestEffort,
		passed:  []string{"ext-1"},
		reasons: map[string][]string{"ext-2": {"needs 60Gi", "has 40Gi"}, "ext-3": {"not ready"}, "ext-4": {"cordoned"}},
		scored:  []string{"ext-1"}},
	// Two replicas: the local one, and one on another node (node
	// anti-affinity is hard by default): either of ext-1 and ext-2 holds
	// the other's.
	{pod: "spread", size: 30 * gi, replicas: 2, locality: lhv1.DataLocalityBestEffort,
		passed:  []string{"ext-1", "ext-2"},
		reasons: map[string][]string{"ext-3": {"not ready"}, "ext-4": {"cordoned"}},
		scored:  []string{"ext-1", "ext-2"}},
	// Three replicas, one per node: only ext-1 and ext-2 take replicas.
	{pod: "three", size: 30 * gi, replicas: 3, locality: lhv1.DataLocalityBestEffort,
		reasons: map[string][]string{"ext-1": {"1 of its 2 other replicas"}, "ext-2": {"1 of its 2 other replicas"},
			"ext-3": {"not ready"}, "ext-4": {"cordoned"}}},
	// Longhorn's default kind asks nothing of the pod's node.
	{pod: "shared", size: 500 * gi, replicas: 3, locality: lhv1.DataLocalityDisabled, passed: extenderNodes},
	// Nor does a ReadWriteMany volume, whatever its data locality.
	{pod: "rwx", size: 500 * gi, replicas: 1, locality: lhv1.DataLocalityBestEffort, rwx: true, passed: extenderNodes},
	// A restarted pod stays with its replica.
	{pod: "restarted", size: 10 * gi, replicas: 1, locality: lhv1.DataLocalityBestEffort, on: "ext-2",
		passed: []string{"ext-2"}, reasons: map[string][]string{"ext-1": {"already holds a replica"}, "ext-3": {"already holds a replica"},
			"ext-4": {"already holds a replica"}},
		scored: []string{"ext-2"}},
	// A strict-local volume whose replica is on ext-1 passes no other node.
	{pod: "pinned", size: 10 * gi, replicas: 1, locality: lhv1.DataLocalityStrictLocal, on: "ext-1",
		passed: []string{"ext-1"}, reasons: map[string][]string{"ext-2": {"already holds a replica"}, "ext-3": {"already holds a replica"},
			"ext-4": {"already holds a replica"}},
		scored: []string{"ext-1"}},
}

// verdict is the extender's answer for one pod, as kube-scheduler gets it
// over HTTP, with the namespace written as NS so releases compare.
type verdict struct {
	Passed []string
	Failed map[string]string
	Scores map[string]int64
}

func (v verdict) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "passed %v", v.Passed)
	for _, n := range slices.Sorted(maps.Keys(v.Failed)) {
		fmt.Fprintf(&b, "; %s: %s", n, v.Failed[n])
	}
	fmt.Fprintf(&b, "; scores %v", v.Scores)
	return b.String()
}

// extenderView is the extender's contract with one release: what it reads
// of Longhorn's objects (Volumes' numberOfReplicas, dataLocality and
// accessMode; Replicas' spec.nodeID, spec.diskID and health; Nodes' disks
// and conditions; the Settings) as that release's CRDs store them gives
// the verdicts of extenderCases through the manager's own extender, asked
// over HTTP as kube-scheduler asks it. It returns the verdicts by pod.
func extenderView(t *testing.T, env *testenv.Env) map[string]verdict {
	ctx := t.Context()
	ns := env.NewNamespace(t)
	c := env.Client

	// Longhorn's Settings, as Longhorn writes them: over-provisioning at
	// 200% doubles every limit.
	for name, value := range map[string]string{settings.StorageOverProvisioningPercentage: "200",
		settings.StorageMinimalAvailablePercentage: "10", settings.DisableSchedulingOnCordonedNode: "true"} {
		s := &lhv1.Setting{TypeMeta: metav1.TypeMeta{APIVersion: lhv1.SchemeGroupVersion.String(), Kind: "Setting"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Value: value}
		if err := testenv.CreateLonghorn(ctx, c, s); err != nil {
			t.Fatal(err)
		}
	}
	uuid := func(node string) string { return ns + "-" + node + "-uuid-1" }
	for _, n := range []testenv.NodeFixture{
		{Name: "ext-1", Disks: map[string]testenv.Disk{"disk-1": {UUID: uuid("ext-1"), Size: 100 * gi, Scheduled: 10 * gi}}},
		{Name: "ext-2", Disks: map[string]testenv.Disk{"disk-1": {UUID: uuid("ext-2"), Size: 100 * gi, Scheduled: 160 * gi}}},
		{Name: "ext-3", NotReady: true, Disks: map[string]testenv.Disk{"disk-1": {UUID: uuid("ext-3"), Size: 100 * gi}}},
		{Name: "ext-4", Cordoned: true, Disks: map[string]testenv.Disk{"disk-1": {UUID: uuid("ext-4"), Size: 100 * gi}}},
	} {
		if err := n.CreateNode(ctx, c, ns); err != nil {
			t.Fatal(err)
		}
	}
	// Another volume's replica, persisted on ext-2.
	if err := testenv.CreateLonghorn(ctx, c, testenv.Volume(ns, "pvc-held", testenv.VolumeFixture{Size: 150 * gi, Replicas: 1})); err != nil {
		t.Fatal(err)
	}
	held := testenv.Replica(ns, "pvc-held-r-1", testenv.ReplicaFixture{Volume: "pvc-held", Size: 150 * gi,
		NodeID: "ext-2", DiskName: "disk-1", DiskID: uuid("ext-2"), State: lhv1.InstanceStateRunning})
	if err := testenv.CreateLonghorn(ctx, c, held); err != nil {
		t.Fatal(err)
	}

	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "longhorn-" + ns}, Provisioner: extender.CSIDriver,
		Parameters: map[string]string{"numberOfReplicas": "3", "dataLocality": "disabled"}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), class) })
	pods := map[string]*corev1.Pod{}
	for _, cc := range extenderCases {
		pods[cc.pod] = boundClaimPod(t, ctx, c, ns, class.Name, cc, uuid)
	}

	// Filters are independent here: a pod let through is not counted in
	// flight (pod-scheduling timeout 0).
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: settings.ConfigMapName},
		Data: map[string]string{settings.SchedulerExtenderPodSchedulingTimeout: "0"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	port, err := controlplane.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	certs, err := extendertls.Write(t.TempDir(), extender.ServiceDNSName(ns))
	if err != nil {
		t.Fatal(err)
	}
	hc, err := certs.HTTPClient(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	m, err := managertest.Start(env, env.Config, manager.Options{Namespace: ns, ExtenderBindAddress: addr,
		ExtenderCertDir: certs.CertDir, ExtenderClientCAFile: certs.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop() })

	// The ledgers, from what that release's Node and Replica objects say:
	// the limits at 200%, and ext-2's replicas adopted.
	for node, scheduled := range map[string]int64{"ext-1": 10 * gi, "ext-2": 160 * gi, "ext-3": 0, "ext-4": 0} {
		testenv.WaitLedger(t, ctx, c, ns, uuid(node), 30*time.Second, "its limit at 200% and what Longhorn persisted there", func(ds *dsv1.DiskSchedule) bool {
			return ds.Status.StorageLimit == 200*gi && ds.Status.StorageScheduled == scheduled && ds.Status.ObservedGeneration == ds.Generation
		})
	}

	out := map[string]verdict{}
	for _, cc := range extenderCases {
		var got verdict
		testenv.Eventually(t, ctx, 30*time.Second, "pod "+cc.pod+"'s verdict", func(ctx context.Context) (bool, string, error) {
			v, err := askExtender(ctx, hc, addr, pods[cc.pod], ns)
			if err != nil {
				return false, err.Error(), nil
			}
			got = v
			return slices.Equal(v.Passed, nonNilSlice(cc.passed)), v.String(), nil
		}, testenv.Every(100*time.Millisecond))
		for node, words := range cc.reasons {
			for _, w := range words {
				if !strings.Contains(got.Failed[node], w) {
					t.Errorf("pod %s, node %s: %q, want it to say %q", cc.pod, node, got.Failed[node], w)
				}
			}
		}
		if len(got.Failed) != len(cc.reasons) {
			t.Errorf("pod %s: failed nodes %v, want %v", cc.pod, slices.Sorted(maps.Keys(got.Failed)), slices.Sorted(maps.Keys(cc.reasons)))
		}
		if scored := scoredNodes(got.Scores); !slices.Equal(scored, nonNilSlice(cc.scored)) {
			t.Errorf("pod %s: nodes scored above 0 %v (%v), want %v", cc.pod, scored, got.Scores, cc.scored)
		}
		t.Logf("pod %s: %s", cc.pod, got)
		out[cc.pod] = got
	}
	return out
}

// boundClaimPod creates the Longhorn Volume of cc (and its replica: placed
// on cc.on, healthy, or not placed yet), a PV of Longhorn's CSI driver and
// a claim bound to it, as Longhorn's CSI driver and kube-controller-manager
// leave them, and the pod using the claim.
func boundClaimPod(t *testing.T, ctx context.Context, c client.Client, ns, class string, cc claimCase, uuid func(string) string) *corev1.Pod {
	t.Helper()
	volume := "pvc-" + cc.pod
	v := testenv.Volume(ns, volume, testenv.VolumeFixture{Size: cc.size, Replicas: cc.replicas, DataLocality: cc.locality})
	mode := corev1.ReadWriteOnce
	if cc.rwx {
		v.Spec.AccessMode, mode = lhv1.AccessModeReadWriteMany, corev1.ReadWriteMany
	}
	if err := testenv.CreateLonghorn(ctx, c, v); err != nil {
		t.Fatal(err)
	}
	r := testenv.ReplicaFixture{Volume: volume, Size: cc.size, DataLocality: cc.locality}
	if cc.on != "" {
		r.NodeID, r.DiskName, r.DiskID, r.State = cc.on, "disk-1", uuid(cc.on), lhv1.InstanceStateRunning
	}
	rep := testenv.Replica(ns, volume+"-r-1", r)
	if cc.on != "" {
		rep.Spec.HealthyAt, rep.Spec.LastHealthyAt = testenv.LonghornTime, testenv.LonghornTime
	}
	if err := testenv.CreateLonghorn(ctx, c, rep); err != nil {
		t.Fatal(err)
	}
	capacity := corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(cc.size, resource.BinarySI)}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: volume + "-" + ns},
		Spec: corev1.PersistentVolumeSpec{Capacity: capacity, AccessModes: []corev1.PersistentVolumeAccessMode{mode},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: extender.CSIDriver, VolumeHandle: volume}},
			StorageClassName: class}}
	if err := c.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), pv) })
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-" + cc.pod, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, VolumeName: pv.Name,
			AccessModes: []corev1.PersistentVolumeAccessMode{mode}, Resources: corev1.VolumeResourceRequirements{Requests: capacity}}}
	if err := c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: cc.pod, Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// askExtender asks the extender at addr to filter, then prioritize, pod on
// extenderNodes, as kube-scheduler does with a nodeCacheCapable extender.
func askExtender(ctx context.Context, hc *http.Client, addr string, pod *corev1.Pod, ns string) (verdict, error) {
	args := extenderv1.ExtenderArgs{Pod: pod, NodeNames: &extenderNodes}
	filtered := extenderv1.ExtenderFilterResult{}
	if err := post(ctx, hc, addr, "/filter", args, &filtered); err != nil {
		return verdict{}, err
	}
	if filtered.Error != "" {
		return verdict{}, fmt.Errorf("filter: %s", filtered.Error)
	}
	v := verdict{Passed: []string{}, Failed: map[string]string{}, Scores: map[string]int64{}}
	if filtered.NodeNames != nil {
		v.Passed = append(v.Passed, *filtered.NodeNames...)
	}
	for node, reason := range filtered.FailedNodes {
		v.Failed[node] = strings.ReplaceAll(reason, ns, "NS")
	}
	scores := extenderv1.HostPriorityList{}
	if err := post(ctx, hc, addr, "/prioritize", args, &scores); err != nil {
		return verdict{}, err
	}
	for _, s := range scores {
		v.Scores[s.Host] = s.Score
	}
	return v, nil
}

// post sends body as JSON to the extender's path and decodes its answer.
func post(ctx context.Context, hc *http.Client, addr, path string, body, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %s", path, resp.StatusCode, answer)
	}
	return json.Unmarshal(answer, out)
}

// scoredNodes returns the nodes scored above 0, highest first (by name
// among equals).
func scoredNodes(scores map[string]int64) []string {
	out := []string{}
	for n, s := range scores {
		if s > 0 {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if scores[out[i]] != scores[out[j]] {
			return scores[out[i]] > scores[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

func nonNilSlice(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
