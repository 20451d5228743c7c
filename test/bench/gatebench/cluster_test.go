package gatebench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/test/bench/benchutil"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/replicawriter"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
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
	// 1024, its bound when the figures in docs/benchmarks.md were measured.
	maxPerDisk = 900
	// creators create the volumes and replicas of a run in parallel.
	creators = 16
	// maxRefusals bounds how often one placement is refused before the
	// benchmark gives up.
	maxRefusals = 30
	// managerPods is how many longhorn-manager pods the writers belong to,
	// each with its own datastore and replica scheduler.
	managerPods = 3
	// oneDiskTag is the Longhorn disk tag of node-1's disk-1 alone: the
	// one-disk shape's volumes select it (spec.diskSelector), so Longhorn's
	// scheduler places every one of them there.
	oneDiskTag = "gatebench-one"
)

// cluster is one of the benchmark's two sandboxes: Longhorn running the
// nodes only and the manager, with the gate registered or not,
// and the longhorn-manager pods whose volume controllers the benchmark's
// writers play with Longhorn's own code.
type cluster struct {
	name  string
	gate  bool
	sb    *sandbox.Sandbox
	admin client.Client
	// pods are the longhorn-manager pods (Longhorn's datastore and replica
	// scheduler); writer w is a volume-controller worker of pod w mod
	// managerPods.
	pods []*replicawriter.Pod
	// firstDisk is the UUID of node-1's disk-1, the disk with oneDiskTag.
	firstDisk   string
	tracker     *benchutil.Tracker
	stopTracker context.CancelFunc
	stopPods    context.CancelFunc
}

// topology is nodeCount nodes with disksPerNode disks of diskSize each;
// node-1's disk-1 has oneDiskTag.
func topology() *sandbox.Topology {
	t := &sandbox.Topology{}
	for n := 1; n <= nodeCount; n++ {
		node := sandbox.Node{Name: fmt.Sprintf("node-%d", n)}
		for d := 1; d <= disksPerNode; d++ {
			node.Disks = append(node.Disks, sandbox.Disk{Name: fmt.Sprintf("disk-%d", d), Size: diskSize})
		}
		t.Nodes = append(t.Nodes, node)
	}
	t.Nodes[0].Disks[0].Tags = []string{oneDiskTag}
	return t
}

// startCluster starts a sandbox of the topology with Longhorn's Nodes only
// (their disks' status and the instance managers kept by longhorn-manager's
// own node, instance manager and Kubernetes node controllers on the
// simulated data plane, and the engine image Longhorn's scheduler
// requires), with the gate
// registered or not, and managerPods longhorn-manager pods on its first
// nodes.
func startCluster(ctx context.Context, name string, gate bool) (*cluster, error) {
	out := &testenv.LockedBuffer{}
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
		Out:               out,
		ReadyTimeout:      5 * time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the sandbox %s: %w\n%s", name, err, out.String())
	}
	c := &cluster{name: name, gate: gate, sb: sb, admin: sb.Client(),
		firstDisk: sandbox.DiskUUID(topo.Nodes[0].Name, topo.Nodes[0].Disks[0].Name)}
	nodes := make([]string, 0, managerPods)
	for _, n := range topo.Nodes[:managerPods] {
		nodes = append(nodes, n.Name)
	}
	podCtx, stopPods := context.WithCancel(context.Background())
	c.stopPods = stopPods
	if c.pods, err = replicawriter.StartPods(podCtx, sb.AdminConfig(), sandbox.Namespace, nodes...); err != nil {
		return nil, errors.Join(err, c.stop())
	}
	c.tracker = benchutil.NewTracker(true)
	if c.stopTracker, err = c.tracker.Track(ctx, c.sb.AdminConfig(), c.sb.Scheme(), sandbox.Namespace, nil); err != nil {
		return nil, errors.Join(err, c.stop())
	}
	return c, nil
}

// stop stops the cluster's tracker, longhorn-manager pods and sandbox.
func (c *cluster) stop() error {
	if c.stopTracker != nil {
		c.stopTracker()
	}
	if c.stopPods != nil {
		c.stopPods()
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
// driver does, with the disk selector selector, each with one unscheduled
// replica as Longhorn's volume controller creates it, and waits until every
// longhorn-manager pod's datastore holds them; it returns the replicas as
// created.
func (c *cluster) prepare(ctx context.Context, prefix string, n int, selector []string) ([]*lhv1.Replica, error) {
	out := make([]*lhv1.Replica, n)
	errs := make([]error, creators)
	var next atomic.Int64
	var wg sync.WaitGroup
	for g := range creators {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				rep, err := replicawriter.CreateVolume(ctx, c.admin, sandbox.Namespace, fmt.Sprintf("%s-%05d", prefix, i), volumeSize, selector...)
				if err != nil {
					errs[g] = err
					return
				}
				out[i] = rep
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	volumes := make(map[string][]string, n)
	for _, rep := range out {
		volumes[rep.Spec.VolumeName] = []string{rep.Name}
	}
	for _, p := range c.pods {
		if err := p.WaitForVolumes(ctx, volumes); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// settle waits until every ledger equals what is persisted on its disk and
// has nothing pending: the gate's grants and the mirror's adoptions of the
// last phase have all landed, so the next phase starts quiet.
func (c *cluster) settle(ctx context.Context) error {
	last, err := testenv.Poll(ctx, *phaseTimeout, func(ctx context.Context) (bool, string, error) {
		if err := c.alive(); err != nil {
			return false, "", err
		}
		off, err := c.unsettled(ctx)
		return off == "" && err == nil, off, err
	}, testenv.Every(100*time.Millisecond))
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
