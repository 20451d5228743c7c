package gatebench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/sandbox"
	"github.com/longhorn/diskschedule/internal/simlonghorn"
	"github.com/longhorn/diskschedule/internal/testenv"
)

const (
	gi = int64(1) << 30
	// nodeCount × disksPerNode is the topology: 64 disks.
	nodeCount, disksPerNode = 8, 8
	// diskSize is every disk's size: room for 4096 replicas of volumeSize,
	// so no write is ever refused for lack of space.
	diskSize = 4 << 40
	// volumeSize is every volume's size, and its replica's volumeSize.
	volumeSize = gi
	// maxPerDisk keeps a disk's replica entries under the ledger's bound of
	// 1024 (spec.replicas maxProperties).
	maxPerDisk = 900
	// creators create the volumes and replicas of a run in parallel.
	creators = 16
	// maxRefusals bounds how often one placement is refused before the
	// benchmark gives up.
	maxRefusals = 30
)

// cluster is one of the benchmark's two sandboxes: Longhorn's Nodes and
// disks and the manager, with the gate registered or not, and no simulated
// volume controller: the benchmark's writers play it.
type cluster struct {
	name    string
	gate    bool
	sb      *sandbox.Sandbox
	admin   client.Client
	writers []client.Client
	// disks are the disks' UUIDs, node-1's disk-1 first; nodeOf and pathOf
	// give each disk's node and path as Longhorn's Node spec has them.
	disks          []string
	nodeOf, pathOf map[string]string
	tracker        *tracker
	stopTracker    context.CancelFunc
}

// topology is nodeCount nodes with disksPerNode disks of diskSize each.
func topology() *sandbox.Topology {
	t := &sandbox.Topology{}
	for n := 1; n <= nodeCount; n++ {
		node := sandbox.Node{Name: fmt.Sprintf("node-%d", n)}
		for d := 1; d <= disksPerNode; d++ {
			node.Disks = append(node.Disks, sandbox.Disk{Name: fmt.Sprintf("disk-%d", d), Size: diskSize})
		}
		t.Nodes = append(t.Nodes, node)
	}
	return t
}

// startCluster starts a sandbox of the topology with Longhorn's Nodes only,
// with the gate registered or not, and a client per writer with no
// client-side rate limit (the writers stand in for volume controllers on
// many nodes).
func startCluster(ctx context.Context, name string, gate bool, writers int) (*cluster, error) {
	var out bytes.Buffer
	logs := ""
	if *logDir != "" {
		logs = filepath.Join(*logDir, strings.ReplaceAll(name, " ", "-"))
	}
	topo := topology()
	sb, err := sandbox.Start(ctx, sandbox.Options{
		Topology:          topo,
		LonghornNodesOnly: true,
		NoGate:            !gate,
		ConfigDir:         filepath.Join(testenv.RepoRoot(), "config"),
		AssetsDir:         testenv.AssetsDir(),
		LogDir:            logs,
		Out:               &lockedBuffer{b: &out},
		ReadyTimeout:      5 * time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the sandbox %s: %w\n%s", name, err, out.String())
	}
	c := &cluster{name: name, gate: gate, sb: sb, admin: sb.Client(), nodeOf: map[string]string{}, pathOf: map[string]string{}}
	for _, n := range topo.Nodes {
		for _, d := range n.Disks {
			uuid := sandbox.DiskUUID(n.Name, d.Name)
			c.disks = append(c.disks, uuid)
			c.nodeOf[uuid], c.pathOf[uuid] = n.Name, simlonghorn.DiskPath(d.Name)
		}
	}
	cfg := sb.AdminConfig()
	cfg.QPS, cfg.Burst = -1, 0
	for range writers {
		w, err := client.New(rest.CopyConfig(cfg), client.Options{Scheme: sb.Scheme()})
		if err != nil {
			return nil, errors.Join(fmt.Errorf("creating a writer's client: %w", err), sb.Stop())
		}
		c.writers = append(c.writers, w)
	}
	if err := c.startTracker(ctx); err != nil {
		return nil, errors.Join(err, sb.Stop())
	}
	return c, nil
}

// stop stops the cluster's tracker and sandbox.
func (c *cluster) stop() error {
	if c.stopTracker != nil {
		c.stopTracker()
	}
	return c.sb.Stop()
}

// alive returns the sandbox's failure, if a component stopped on its own.
func (c *cluster) alive() error {
	select {
	case <-c.sb.Done():
		return fmt.Errorf("the sandbox %s: %w", c.name, c.sb.Err())
	default:
		return nil
	}
}

// prepare creates n Longhorn Volumes of volumeSize as the Longhorn CSI
// driver does, each with one unscheduled replica as Longhorn's volume
// controller creates it, and returns the replicas as created.
func (c *cluster) prepare(ctx context.Context, prefix string, n int) ([]*lhv1.Replica, error) {
	out := make([]*lhv1.Replica, n)
	errs := make([]error, creators)
	var next atomic.Int64
	var wg sync.WaitGroup
	for g := range creators {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				rep, err := c.createVolume(ctx, fmt.Sprintf("%s-%05d", prefix, i))
				if err != nil {
					errs[g] = err
					return
				}
				out[i] = rep
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// createVolume creates one volume, for a claim with the given UID, and its
// unscheduled replica.
func (c *cluster) createVolume(ctx context.Context, uid string) (*lhv1.Replica, error) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(volumeSize, resource.BinarySI)},
		}},
	}
	vol, err := simlonghorn.VolumeFor(pvc, sandbox.StorageClass(), sandbox.Namespace)
	if err != nil {
		return nil, err
	}
	if err := c.admin.Create(ctx, vol); err != nil {
		return nil, fmt.Errorf("creating volume %s: %w", vol.Name, err)
	}
	rep := simlonghorn.NewReplica(vol, "", "0")
	if err := c.admin.Create(ctx, rep); err != nil {
		return nil, fmt.Errorf("creating replica %s: %w", rep.Name, err)
	}
	return rep, nil
}

// place is one replica's placement by writer w: the replica, as the volume
// controller's cache holds it, updated whole with the chosen node, disk,
// path and data directory, as longhorn-manager v1.12 writes it. A refused
// write is tried again after the volume controller's requeue backoff, as
// Longhorn does. It returns when the first write started, how long until
// one succeeded, and how many were refused before.
func (c *cluster) place(ctx context.Context, w int, rep *lhv1.Replica, disk string) (time.Time, time.Duration, int, error) {
	next := rep.DeepCopy()
	next.Spec.NodeID, next.Spec.DiskID, next.Spec.DiskPath = c.nodeOf[disk], disk, c.pathOf[disk]
	next.Spec.DataDirectoryName = dataDirectory(rep)
	start := time.Now()
	for refused := 0; ; refused++ {
		err := c.writers[w].Update(ctx, next.DeepCopy())
		if err == nil {
			return start, time.Since(start), refused, nil
		}
		if ctx.Err() != nil || refused == maxRefusals {
			return start, 0, refused, fmt.Errorf("%s: placing replica %s on disk %s, refused %d times: %w", c.name, rep.Name, disk, refused, err)
		}
		select {
		case <-time.After(requeueDelay(refused)):
		case <-ctx.Done():
		}
	}
}

// requeueDelay is the delay before a volume's n-th retry (from 0): the
// exponential per-item backoff of the volume controller's workqueue,
// client-go's default, 5ms doubling.
func requeueDelay(n int) time.Duration { return 5 * time.Millisecond << min(n, 10) }

// dataDirectory names a replica's data directory as Longhorn does: the
// volume's name and eight hex digits (a hash of the replica's name here,
// where Longhorn draws them at random).
func dataDirectory(rep *lhv1.Replica) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(rep.Name))
	return fmt.Sprintf("%s-%08x", rep.Spec.VolumeName, h.Sum32())
}

// settle waits until every ledger equals what is persisted on its disk and
// has nothing pending: the gate's grants and the mirror's adoptions of the
// last phase have all landed, so the next phase starts quiet.
func (c *cluster) settle(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, *phaseTimeout, true, func(ctx context.Context) (bool, error) {
		if err := c.alive(); err != nil {
			return false, err
		}
		off, err := c.unsettled(ctx)
		last = off
		return off == "" && err == nil, err
	})
	if err != nil {
		return fmt.Errorf("%s: the ledgers did not settle on what is persisted (%s): %w", c.name, last, err)
	}
	return nil
}

// unsettled describes the ledgers that differ from what is persisted on
// their disk or have pending requests, or returns "".
func (c *cluster) unsettled(ctx context.Context) (string, error) {
	return testenv.Unsettled(ctx, c.admin, sandbox.Namespace)
}

// lockedBuffer collects a sandbox's progress lines from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
