package scalebench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

const (
	gi = int64(1) << 30
	ns = "longhorn-system"
	// diskSize is every disk's storageMaximum.
	diskSize = 2 << 40
	// fillSize is the volumeSize of the replicas that fill the gate's disks
	// and of the replicas the gate's measurement writes: 1000 of them fit
	// a disk's limit.
	fillSize = gi
)

// fillLevels are the replica counts the gate's disks hold before the
// measurement, on disks 0, 1 and 2 of each gate node.
var fillLevels = []int{0, 100, 1000}

// layout is the generated cluster: names and what is persisted where.
type layout struct {
	nodes []string
	// diskUUID[n][d] is node n's disk d's UUID (the name of its ledger).
	diskUUID [][]string
	// persisted is Σ volumeSize of the replicas persisted per disk UUID.
	persisted map[string]int64
	// scheduled[uuid] is the disk's scheduledReplica: replica → volumeSize.
	scheduled map[string]map[string]int64
	// gateDisks[level] are the UUIDs of the disks holding fillLevels[level]
	// replicas; gateReplicas[uuid] the unscheduled replicas the
	// measurement writes onto that disk.
	gateDisks    [][]string
	gateReplicas map[string][]string
	// nodeOf and diskName locate a disk UUID.
	nodeOf, diskName  map[string]string
	replicas, volumes int
}

func diskUUID(n, d int) string {
	return fmt.Sprintf("%08x-%04x-4000-8000-%012x", n, d, n*1000+d)
}

func volumeName(prefix string, i int) string {
	return fmt.Sprintf("pvc-%s%07x-0000-4000-8000-%012x", prefix, i, i)
}

func replicaName(volume string, k int) string {
	return fmt.Sprintf("%s-r-%08x", volume, k*2654435761%(1<<32))
}

// volumeSize is volume i's size: 10Gi to 100Gi.
func volumeSize(i int) int64 { return int64(1+i%10) * 10 * gi }

// plan lays the cluster out: volume v's replica k on node (v·R+k) mod M of
// the first M = nodes − gate-nodes nodes (distinct nodes per volume while
// M ≥ R), on its disk ((v·R+k) div M) mod disks. The last gate-nodes nodes
// hold only the gate's fills.
func plan() (*layout, error) {
	nodes, disks, gateN := *nodeCount, *diskCount, *gateNodes
	if disks < len(fillLevels) {
		return nil, fmt.Errorf("the gate's measurement needs %d disks per node", len(fillLevels))
	}
	base := nodes - gateN
	if base < *replicaCount {
		return nil, fmt.Errorf("%d nodes less %d for the gate cannot hold %d replicas of a volume on distinct nodes", nodes, gateN, *replicaCount)
	}
	if fillLevels[len(fillLevels)-1]+*gateWrites > dsv1.MaxReplicaEntries {
		return nil, fmt.Errorf("%d + %d entries exceed the ledger's bound of %d", fillLevels[len(fillLevels)-1], *gateWrites, dsv1.MaxReplicaEntries)
	}
	l := &layout{persisted: map[string]int64{}, scheduled: map[string]map[string]int64{},
		gateReplicas: map[string][]string{}, nodeOf: map[string]string{}, diskName: map[string]string{},
		gateDisks: make([][]string, len(fillLevels))}
	for n := range nodes {
		name := fmt.Sprintf("node-%04d", n)
		l.nodes = append(l.nodes, name)
		var uuids []string
		for d := range disks {
			u := diskUUID(n, d)
			uuids = append(uuids, u)
			l.scheduled[u] = map[string]int64{}
			l.nodeOf[u], l.diskName[u] = name, fmt.Sprintf("disk-%d", d)
		}
		l.diskUUID = append(l.diskUUID, uuids)
	}
	for v := range *volumeCount {
		vol := volumeName("", v)
		for k := range *replicaCount {
			slot := v**replicaCount + k
			u := l.diskUUID[slot%base][(slot/base)%disks]
			l.scheduled[u][replicaName(vol, k)] = volumeSize(v)
			l.persisted[u] += volumeSize(v)
			l.replicas++
		}
		l.volumes++
	}
	for g := range gateN {
		for level, count := range fillLevels {
			u := l.diskUUID[base+g][level]
			l.gateDisks[level] = append(l.gateDisks[level], u)
			for i := range count {
				vol := volumeName(fmt.Sprintf("f%d%d", g, level), i)
				l.scheduled[u][replicaName(vol, 0)] = fillSize
				l.persisted[u] += fillSize
				l.replicas++
				l.volumes++
			}
			for i := range *gateWrites {
				vol := volumeName(fmt.Sprintf("g%d%d", g, level), i)
				l.gateReplicas[u] = append(l.gateReplicas[u], replicaName(vol, 0))
				l.replicas++
				l.volumes++
			}
		}
	}
	return l, nil
}

// nodeFixture returns node n's Longhorn Node as longhorn-manager writes it,
// each disk's status carrying its scheduledReplica and storageScheduled as
// Longhorn's node controller counts them, and storageAvailable a quarter of
// the scheduled bytes less than storageMaximum (thin volumes partly written).
func (l *layout) longhornNode(n int) *lhv1.Node {
	f := testenv.NodeFixture{Name: l.nodes[n], Zone: fmt.Sprintf("zone-%d", n%3), Disks: map[string]testenv.Disk{}}
	for d, u := range l.diskUUID[n] {
		f.Disks[fmt.Sprintf("disk-%d", d)] = testenv.Disk{UUID: u, Size: diskSize,
			Available: diskSize - l.persisted[u]/4, Scheduled: l.persisted[u]}
	}
	node := f.LonghornNode(ns)
	for d, u := range l.diskUUID[n] {
		st := node.Status.DiskStatus[fmt.Sprintf("disk-%d", d)]
		for r, size := range l.scheduled[u] {
			st.ScheduledReplica[r] = size
		}
	}
	return node
}

// create writes the cluster into the API server with many concurrent
// clients: Longhorn Nodes, Volumes and Replicas (each created and its
// status written, as Longhorn does), every replica already on its disk
// except the gate's measured ones, which are created unscheduled.
func (l *layout) create(ctx context.Context, logf func(string, ...any)) error {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return err
	}
	start := time.Now()
	err = parallel(len(l.nodes), func(n int) error {
		return testenv.CreateLonghorn(ctx, c, l.longhornNode(n))
	})
	if err != nil {
		return err
	}
	logf("created %d Longhorn nodes × %d disks in %s", len(l.nodes), *diskCount, time.Since(start).Round(time.Second))

	// Base volumes: R replicas each.
	base := len(l.nodes) - *gateNodes
	var done atomic.Int64
	err = parallel(*volumeCount, func(v int) error {
		vol := volumeName("", v)
		if err := testenv.CreateLonghorn(ctx, c, testenv.Volume(ns, vol, testenv.VolumeFixture{Size: volumeSize(v), Replicas: *replicaCount})); err != nil {
			return err
		}
		for k := range *replicaCount {
			slot := v**replicaCount + k
			n, d := slot%base, (slot/base)%*diskCount
			r := testenv.Replica(ns, replicaName(vol, k), testenv.ReplicaFixture{Volume: vol, Size: volumeSize(v),
				NodeID: l.nodes[n], DiskName: fmt.Sprintf("disk-%d", d), DiskID: l.diskUUID[n][d]})
			if err := testenv.CreateLonghorn(ctx, c, r); err != nil {
				return err
			}
		}
		if i := done.Add(1); i%2000 == 0 {
			logf("created %d of %d volumes and their replicas in %s", i, *volumeCount, time.Since(start).Round(time.Second))
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The gate's disks: fills persisted there, and the replicas to write.
	type one struct {
		vol, disk string
		placed    bool
	}
	var extra []one
	for g := range *gateNodes {
		for level, count := range fillLevels {
			u := l.diskUUID[base+g][level]
			for i := range count {
				extra = append(extra, one{volumeName(fmt.Sprintf("f%d%d", g, level), i), u, true})
			}
			for i := range *gateWrites {
				extra = append(extra, one{volumeName(fmt.Sprintf("g%d%d", g, level), i), u, false})
			}
		}
	}
	err = parallel(len(extra), func(i int) error {
		e := extra[i]
		if err := testenv.CreateLonghorn(ctx, c, testenv.Volume(ns, e.vol, testenv.VolumeFixture{Size: fillSize, Replicas: 1})); err != nil {
			return err
		}
		f := testenv.ReplicaFixture{Volume: e.vol, Size: fillSize}
		if e.placed {
			f.NodeID, f.DiskName, f.DiskID = l.nodeOf[e.disk], l.diskName[e.disk], e.disk
		}
		return testenv.CreateLonghorn(ctx, c, testenv.Replica(ns, replicaName(e.vol, 0), f))
	})
	if err != nil {
		return err
	}
	logf("created %d volumes and %d replicas in all in %s", l.volumes, l.replicas, time.Since(start).Round(time.Second))
	return nil
}

// parallel runs f(0..n-1) on -scalebench.creators goroutines and returns
// the first errors.
func parallel(n int, f func(int) error) error {
	var next atomic.Int64
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range *creators {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := f(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 3 {
		errs = errs[:3]
	}
	return errors.Join(errs...)
}
