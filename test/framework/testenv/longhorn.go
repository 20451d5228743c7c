package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The fixtures below write Longhorn's objects the way longhorn-manager
// v1.12 does: with Longhorn's own Go types (which serialize every field,
// volumeSize and size as strings), the defaults Longhorn's mutating webhook
// fills in, Longhorn's conditions (string times, lastProbeTime empty) and a
// status written through the status subresource after the object is
// created. Tests use them to play Longhorn.

// LonghornTime is the time fixtures write into Longhorn's string-typed
// condition times, in Longhorn's format.
const LonghornTime = "2026-01-02T03:04:05Z"

// EngineImage is the engine image fixtures name, as Longhorn v1.12 does.
const EngineImage = "longhornio/longhorn-engine:v1.12.0"

// Disk describes a disk of a test node, as Longhorn reports it.
type Disk struct {
	// UUID is status.diskStatus[name].diskUUID; it names the disk's DiskSchedule.
	UUID string
	// Size is storageMaximum, in bytes.
	Size int64
	// Available is storageAvailable; Size when 0.
	Available int64
	// Reserved is spec storageReserved, in bytes.
	Reserved int64
	// Scheduled is Longhorn's own status storageScheduled, in bytes.
	Scheduled int64
	// Tags are the disk's spec tags.
	Tags []string
	// NotReady makes the disk's Ready (and Schedulable) condition False.
	NotReady bool
	// SchedulingDisabled sets spec allowScheduling false.
	SchedulingDisabled bool
	// EvictionRequested sets spec evictionRequested.
	EvictionRequested bool
}

// NodeFixture describes a test node: a Ready Kubernetes Node and the
// Longhorn Node longhorn-manager keeps for it.
type NodeFixture struct {
	// Name is the node's name.
	Name string
	// Zone and Region are the topology labels of the Kubernetes node and
	// the Longhorn node's status.zone and status.region.
	Zone, Region string
	// Tags are the Longhorn node's spec tags.
	Tags []string
	// Disks are the node's disks by name.
	Disks map[string]Disk
	// NotReady makes the Longhorn node's Ready condition False.
	NotReady bool
	// Cordoned makes the Longhorn node's Schedulable condition False, as
	// Longhorn reports a cordoned node while disable-scheduling-on-cordoned-node is true.
	Cordoned bool
	// SchedulingDisabled sets spec allowScheduling false.
	SchedulingDisabled bool
	// EvictionRequested sets spec evictionRequested.
	EvictionRequested bool
}

// KubeNode returns the fixture's Kubernetes Node.
func (f NodeFixture) KubeNode() *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: f.Name, Labels: map[string]string{corev1.LabelHostname: f.Name}}}
	if f.Zone != "" {
		n.Labels[corev1.LabelTopologyZone] = f.Zone
	}
	if f.Region != "" {
		n.Labels[corev1.LabelTopologyRegion] = f.Region
	}
	return n
}

// LonghornNode returns the fixture's Longhorn Node in namespace, spec and
// status as longhorn-manager v1.12 writes them.
func (f NodeFixture) LonghornNode(namespace string) *lhv1.Node {
	n := &lhv1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: lhv1.SchemeGroupVersion.String(), Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: f.Name, Namespace: namespace},
		Spec: lhv1.NodeSpec{
			Name: f.Name, Disks: map[string]lhv1.DiskSpec{},
			AllowScheduling: !f.SchedulingDisabled, EvictionRequested: f.EvictionRequested,
			Tags: nonNil(f.Tags),
		},
	}
	f.setStatus(n)
	for _, name := range slices.Sorted(maps.Keys(f.Disks)) {
		d := f.Disks[name]
		n.Spec.Disks[name] = lhv1.DiskSpec{
			Type: lhv1.DiskTypeFilesystem, Path: DiskPath(name), DiskDriver: lhv1.DiskDriverNone,
			AllowScheduling: !d.SchedulingDisabled, EvictionRequested: d.EvictionRequested,
			StorageReserved: d.Reserved, Tags: nonNil(d.Tags),
		}
	}
	return n
}

// setStatus sets n's status from the fixture, as longhorn-manager reports it.
func (f NodeFixture) setStatus(n *lhv1.Node) {
	n.Status = lhv1.NodeStatus{
		Conditions: []lhv1.Condition{
			LonghornCondition(lhv1.NodeConditionTypeReady, !f.NotReady, lhv1.NodeConditionReasonKubernetesNodeNotReady,
				fmt.Sprintf("Kubernetes node %v not ready", f.Name)),
			LonghornCondition(lhv1.NodeConditionTypeSchedulable, !f.Cordoned, lhv1.NodeConditionReasonKubernetesNodeCordoned,
				fmt.Sprintf("Node %v is cordoned", f.Name)),
			LonghornCondition(lhv1.NodeConditionTypeMountPropagation, true, "", ""),
			LonghornCondition(lhv1.NodeConditionTypeKernelModulesLoaded, true, "", ""),
			LonghornCondition(lhv1.NodeConditionTypeRequiredPackages, true, "", ""),
			LonghornCondition(lhv1.NodeConditionTypeNFSClientInstalled, true, "", ""),
		},
		DiskStatus: map[string]*lhv1.DiskStatus{},
		Region:     f.Region,
		Zone:       f.Zone,
	}
	for _, name := range slices.Sorted(maps.Keys(f.Disks)) {
		d := f.Disks[name]
		available := d.Available
		if available == 0 {
			available = d.Size
		}
		ready := !d.NotReady && !f.NotReady
		n.Status.DiskStatus[name] = &lhv1.DiskStatus{
			Conditions: []lhv1.Condition{
				LonghornCondition(lhv1.DiskConditionTypeReady, ready, lhv1.DiskConditionReasonDiskNotReady,
					fmt.Sprintf("Disk %v(%v) on node %v is not ready", name, DiskPath(name), f.Name)),
				LonghornCondition(lhv1.DiskConditionTypeSchedulable, ready, lhv1.DiskConditionReasonDiskNotReady,
					fmt.Sprintf("Disk %v(%v) on node %v is not ready", name, DiskPath(name), f.Name)),
			},
			StorageAvailable:      available,
			StorageScheduled:      d.Scheduled,
			StorageMaximum:        d.Size,
			ScheduledReplica:      map[string]int64{},
			ScheduledBackingImage: map[string]int64{},
			DiskUUID:              d.UUID,
			DiskName:              name,
			DiskPath:              DiskPath(name),
			Type:                  lhv1.DiskTypeFilesystem,
			DiskDriver:            lhv1.DiskDriverNone,
			FSType:                "ext4",
			InstanceManagerName:   "instance-manager-" + shortHash(f.Name),
		}
	}
}

// DiskPath is the path fixtures give the disk of that name.
func DiskPath(name string) string { return "/var/lib/longhorn/" + name + "/" }

// LonghornCondition returns a condition as Longhorn writes it: True with
// empty reason and message, or False with reason and message; an empty
// lastProbeTime and a lastTransitionTime in Longhorn's string format.
func LonghornCondition(typ string, ok bool, reason, message string) lhv1.Condition {
	if ok {
		return lhv1.Condition{Type: typ, Status: lhv1.ConditionStatusTrue, LastTransitionTime: LonghornTime}
	}
	return lhv1.Condition{Type: typ, Status: lhv1.ConditionStatusFalse, LastTransitionTime: LonghornTime, Reason: reason, Message: message}
}

// CreateNode creates the fixture's Kubernetes Node (made Ready, as no node
// lifecycle controller runs here) and its Longhorn Node in namespace, with
// its status.
func (f NodeFixture) CreateNode(ctx context.Context, c client.Client, namespace string) error {
	kn := f.KubeNode()
	if err := c.Create(ctx, kn); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Kubernetes node %s: %w", f.Name, err)
	}
	if err := MakeKubeNodeReady(ctx, c, f.Name, nil); err != nil {
		return err
	}
	if err := CreateLonghorn(ctx, c, f.LonghornNode(namespace)); err != nil {
		return fmt.Errorf("creating Longhorn node %s: %w", f.Name, err)
	}
	return nil
}

// Apply writes the fixture's spec and status over the Longhorn Node, as
// longhorn-manager would after the disks changed (added, removed, a new
// UUID, new conditions), retrying on conflict.
func (f NodeFixture) Apply(ctx context.Context, c client.Client, namespace string) error {
	want := f.LonghornNode(namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &lhv1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: f.Name}, n); err != nil {
			return err
		}
		n.Spec = want.Spec
		if err := c.Update(ctx, n); err != nil {
			return err
		}
		n.Status = want.Status
		return c.Status().Update(ctx, n)
	})
	if err != nil {
		return fmt.Errorf("updating Longhorn node %s: %w", f.Name, err)
	}
	return nil
}

// CreateLonghorn creates a Longhorn object and then writes the status it
// carries through the status subresource, as Longhorn's controllers do
// (the create ignores status). obj is updated with the stored object.
func CreateLonghorn(ctx context.Context, c client.Client, obj client.Object) error {
	status, err := statusOf(obj)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, obj); err != nil {
		return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
	}
	if status == nil {
		return nil
	}
	status(obj)
	if err := c.Status().Update(ctx, obj); err != nil {
		return fmt.Errorf("writing the status of %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}

// statusOf returns a function that puts obj's current status back on it
// (after Create has replaced it with the stored, empty one).
func statusOf(obj client.Object) (func(client.Object), error) {
	switch o := obj.(type) {
	case *lhv1.Node:
		st := *o.Status.DeepCopy()
		return func(obj client.Object) { obj.(*lhv1.Node).Status = st }, nil
	case *lhv1.Volume:
		st := *o.Status.DeepCopy()
		return func(obj client.Object) { obj.(*lhv1.Volume).Status = st }, nil
	case *lhv1.Replica:
		st := *o.Status.DeepCopy()
		return func(obj client.Object) { obj.(*lhv1.Replica).Status = st }, nil
	case *lhv1.BackingImage:
		st := *o.Status.DeepCopy()
		return func(obj client.Object) { obj.(*lhv1.BackingImage).Status = st }, nil
	case *lhv1.Setting:
		return nil, nil
	}
	return nil, fmt.Errorf("CreateLonghorn does not know %T", obj)
}

// VolumeFixture describes a Longhorn Volume.
type VolumeFixture struct {
	// Size is spec.size in bytes.
	Size int64
	// Replicas is spec.numberOfReplicas; 3 when 0.
	Replicas int
	// NodeID is the node the volume is attached to; "" when detached.
	NodeID string
	// BackingImage is spec.backingImage.
	BackingImage string
	// DataLocality is spec.dataLocality; disabled (Longhorn's default) when "".
	DataLocality lhv1.DataLocality
	// DiskSelector is spec.diskSelector: the disk tags a replica's disk
	// must carry.
	DiskSelector []string
}

// Volume returns a Longhorn Volume as longhorn-manager v1.12 writes it,
// with the defaults its mutating webhook fills in.
func Volume(namespace, name string, f VolumeFixture) *lhv1.Volume {
	replicas := f.Replicas
	if replicas == 0 {
		replicas = 3
	}
	locality := f.DataLocality
	if locality == "" {
		locality = lhv1.DataLocalityDisabled
	}
	state, robustness := lhv1.VolumeStateDetached, lhv1.VolumeRobustnessUnknown
	if f.NodeID != "" {
		state, robustness = lhv1.VolumeStateAttached, lhv1.VolumeRobustnessHealthy
	}
	diskSelector := f.DiskSelector
	if diskSelector == nil {
		diskSelector = []string{}
	}
	return &lhv1.Volume{
		TypeMeta:   metav1.TypeMeta{APIVersion: lhv1.SchemeGroupVersion.String(), Kind: "Volume"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Finalizers: []string{"longhorn.io"}},
		Spec: lhv1.VolumeSpec{
			Size: f.Size, Frontend: lhv1.VolumeFrontendBlockDev,
			RestoreVolumeRecurringJob: lhv1.RestoreVolumeRecurringJobDefault,
			DataLocality:              locality, StaleReplicaTimeout: 30, NodeID: f.NodeID,
			Image: EngineImage, BackingImage: f.BackingImage,
			DiskSelector: diskSelector, NodeSelector: []string{},
			RevisionCounterDisabled:     true,
			UnmapMarkSnapChainRemoved:   lhv1.UnmapMarkSnapChainRemovedIgnored,
			ReplicaSoftAntiAffinity:     lhv1.ReplicaSoftAntiAffinityDefault,
			ReplicaZoneSoftAntiAffinity: lhv1.ReplicaZoneSoftAntiAffinityDefault,
			ReplicaDiskSoftAntiAffinity: lhv1.ReplicaDiskSoftAntiAffinityDefault,
			AccessMode:                  lhv1.AccessModeReadWriteOnce,
			NumberOfReplicas:            replicas,
			ReplicaAutoBalance:          lhv1.ReplicaAutoBalanceIgnored,
			SnapshotDataIntegrity:       lhv1.SnapshotDataIntegrityIgnored,
			BackupCompressionMethod:     lhv1.BackupCompressionMethodLz4,
			BackupBlockSize:             2 << 20,
			DataEngine:                  lhv1.DataEngineTypeV1,
			FreezeFilesystemForSnapshot: lhv1.FreezeFilesystemForSnapshotDefault,
			BackupTargetName:            "default",
			OfflineRebuilding:           lhv1.VolumeOfflineRebuildingIgnored,
		},
		Status: lhv1.VolumeStatus{
			OwnerID: f.NodeID, State: state, Robustness: robustness, CurrentNodeID: f.NodeID, CurrentImage: EngineImage,
			Conditions: []lhv1.Condition{
				LonghornCondition("Scheduled", true, "", ""),
				LonghornCondition("Restore", false, "", ""),
				LonghornCondition("TooManySnapshots", false, "", ""),
			},
		},
	}
}

// ReplicaFixture describes a Longhorn Replica.
type ReplicaFixture struct {
	// Volume is spec.volumeName.
	Volume string
	// Size is spec.volumeSize in bytes.
	Size int64
	// NodeID is spec.nodeID; "" while unscheduled.
	NodeID string
	// DiskName is the name of the disk on the node, for spec.diskPath.
	DiskName string
	// DiskID is spec.diskID, the disk's UUID; "" while unscheduled.
	DiskID string
	// State is status.currentState; stopped when empty.
	State lhv1.InstanceState
	// BackingImage is spec.backingImage.
	BackingImage string
	// DataLocality is spec.dataLocality; disabled (Longhorn's default) when "".
	DataLocality lhv1.DataLocality
	// DiskSelector is spec.diskSelector: the disk tags a replica's disk
	// must carry.
	DiskSelector []string
}

// Replica returns a Longhorn Replica as longhorn-manager v1.12 writes it.
func Replica(namespace, name string, f ReplicaFixture) *lhv1.Replica {
	state := f.State
	if state == "" {
		state = lhv1.InstanceStateStopped
	}
	desire := lhv1.InstanceStateStopped
	if state == lhv1.InstanceStateRunning || state == lhv1.InstanceStateStarting {
		desire = lhv1.InstanceStateRunning
	}
	r := &lhv1.Replica{
		TypeMeta: metav1.TypeMeta{APIVersion: lhv1.SchemeGroupVersion.String(), Kind: "Replica"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Finalizers: []string{"longhorn.io"},
			Labels: map[string]string{"longhornvolume": f.Volume, "longhorn.io/data-engine": "v1"}},
		Spec: lhv1.ReplicaSpec{
			InstanceSpec: lhv1.InstanceSpec{
				VolumeName: f.Volume, VolumeSize: f.Size, NodeID: f.NodeID, Image: EngineImage,
				DesireState: desire, DataEngine: lhv1.DataEngineTypeV1,
			},
			EngineName:        f.Volume + "-e-0",
			DiskID:            f.DiskID,
			DataDirectoryName: f.Volume + "-" + shortHash(name),
			BackingImage:      f.BackingImage,
			Active:            true,
			SnapshotMaxCount:  250,
		},
		Status: lhv1.ReplicaStatus{InstanceStatus: lhv1.InstanceStatus{
			OwnerID: f.NodeID, CurrentState: state,
			Conditions: []lhv1.Condition{
				{Type: lhv1.ReplicaConditionTypeRebuildFailed, Status: lhv1.ConditionStatusFalse},
				{Type: lhv1.ReplicaConditionTypeWaitForBackingImage, Status: lhv1.ConditionStatusFalse},
			},
		}},
	}
	if f.DiskID != "" {
		r.Spec.DiskPath = DiskPath(f.DiskName)
	}
	if f.NodeID != "" {
		r.Labels["longhornnode"] = f.NodeID
		r.Status.InstanceManagerName = "instance-manager-" + shortHash(f.NodeID)
		if state == lhv1.InstanceStateRunning {
			r.Status.CurrentImage, r.Status.IP, r.Status.StorageIP, r.Status.Port, r.Status.Started = EngineImage, "10.0.0.1", "10.0.0.1", 10000, true
		}
	}
	return r
}

// BackingImage returns a Longhorn BackingImage as longhorn-manager v1.12
// writes it, with a copy on each of disks (UUIDs) and status.size size (0:
// not known yet).
func BackingImage(namespace, name string, size int64, disks ...string) *lhv1.BackingImage {
	bi := &lhv1.BackingImage{
		TypeMeta:   metav1.TypeMeta{APIVersion: lhv1.SchemeGroupVersion.String(), Kind: "BackingImage"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Finalizers: []string{"longhorn.io"}},
		Spec: lhv1.BackingImageSpec{
			Disks:           map[string]string{},
			DiskFileSpecMap: map[string]*lhv1.BackingImageDiskFileSpec{},
			SourceType:      lhv1.BackingImageDataSourceTypeDownload,
			SourceParameters: map[string]string{
				"url": "https://cloud-images.example/" + name + ".qcow2",
			},
			MinNumberOfCopies: 1,
			DiskSelector:      []string{},
			NodeSelector:      []string{},
			DataEngine:        lhv1.DataEngineTypeV1,
		},
		Status: lhv1.BackingImageStatus{
			UUID: shortHash(name), Size: size, VirtualSize: size, RealSize: size,
			DiskFileStatusMap: map[string]*lhv1.BackingImageDiskFileStatus{},
			DiskLastRefAtMap:  map[string]string{},
		},
	}
	for _, uuid := range disks {
		bi.Spec.DiskFileSpecMap[uuid] = &lhv1.BackingImageDiskFileSpec{DataEngine: lhv1.DataEngineTypeV1}
		state := lhv1.BackingImageStateInProgress
		if size > 0 {
			state = lhv1.BackingImageStateReady
		}
		bi.Status.DiskFileStatusMap[uuid] = &lhv1.BackingImageDiskFileStatus{
			DataEngine: lhv1.DataEngineTypeV1, State: state, Progress: 100, LastStateTransitionTime: LonghornTime,
		}
	}
	return bi
}

// MakeKubeNodeReady sets the Kubernetes node Ready with allocatable
// resources (plus extra), and removes the not-ready taint.
func MakeKubeNodeReady(ctx context.Context, c client.Client, name string, extra corev1.ResourceList) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return err
		}
		taints := n.Spec.Taints[:0]
		for _, t := range n.Spec.Taints {
			if t.Key != corev1.TaintNodeNotReady {
				taints = append(taints, t)
			}
		}
		n.Spec.Taints = taints
		if err := c.Update(ctx, n); err != nil {
			return err
		}
		resources := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("64"),
			corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods:   resource.MustParse("250"),
		}
		for k, v := range extra {
			resources[k] = v
		}
		n.Status.Capacity, n.Status.Allocatable = resources, resources
		n.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "simulated node", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}}
		return c.Status().Update(ctx, n)
	})
}

// DiskUUIDs returns the UUIDs of every disk of the fixtures, sorted.
func DiskUUIDs(fixtures ...NodeFixture) []string {
	var out []string
	for _, f := range fixtures {
		for _, d := range f.Disks {
			out = append(out, d.UUID)
		}
	}
	sort.Strings(out)
	return out
}

// shortHash returns 8 hex digits derived from s, for the generated names
// Longhorn gives instance managers and data directories.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
