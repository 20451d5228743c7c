package longhornmanager

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/longhorn/longhorn-manager/manager"
	lhtypes "github.com/longhorn/longhorn-manager/types"
	lhutil "github.com/longhorn/longhorn-manager/util"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/longhorn/diskschedule/test/infrastructure/longhornpod"
)

// Attacher attaches Longhorn volumes to the nodes of the pods using them
// and detaches them when none does, through Longhorn's own
// manager.VolumeManager: what kube-controller-manager's attach-detach
// controller, the CSI external-attacher and Longhorn's CSI driver do in a
// cluster (the driver's ControllerPublishVolume reaches longhorn-manager's
// API, whose handler is VolumeManager.Attach with the csi-attacher type and
// the VolumeAttachment's name as the attachment ID; ControllerUnpublish is
// VolumeManager.Detach). Longhorn's volume attachment controller then
// attaches the volume from the tickets. A volume whose pods run on two
// nodes has a ticket on each: for a migratable volume that starts Longhorn's
// live migration (as KubeVirt's target virt-launcher pod does), and the
// first pod's end, its ticket removed, confirms it.
type Attacher struct {
	pod     *longhornpod.Pod
	volumes *manager.VolumeManager
	queue   workqueue.TypedRateLimitingInterface[string]
	log     logrus.FieldLogger
}

// NewAttacher builds an Attacher over pod's datastore, following its pod
// informer.
func NewAttacher(pod *longhornpod.Pod, log logrus.FieldLogger) (*Attacher, error) {
	a := &Attacher{
		pod:     pod,
		volumes: manager.NewVolumeManager(pod.Node, pod.DataStore, lhutil.NewAtomicCounter(), nil),
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		log:     log.WithField("component", "csi-attacher"),
	}
	enqueue := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			for _, v := range a.podVolumes(p) {
				a.queue.Add(v)
			}
		}
	}
	_, err := pod.DataStore.PodInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	if err != nil {
		return nil, fmt.Errorf("the CSI attacher's pod handler: %w", err)
	}
	// A claim bound after its pod was scheduled shows in the volume's
	// status (Longhorn's Kubernetes PV controller writes its workloads).
	enqueueVolume := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if v, ok := obj.(*lhv1.Volume); ok {
			a.queue.Add(v.Name)
		}
	}
	_, err = pod.DataStore.VolumeInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueVolume,
		UpdateFunc: func(_, obj any) { enqueueVolume(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("the CSI attacher's volume handler: %w", err)
	}
	return a, nil
}

// AttacherWorkers is how many volumes the Attacher attaches or detaches at
// once: the CSI external-attacher's --worker-threads default.
const AttacherWorkers = 10

// Run attaches and detaches with AttacherWorkers workers until ctx ends.
func (a *Attacher) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		a.queue.ShutDown()
	}()
	var workers sync.WaitGroup
	for range AttacherWorkers {
		workers.Go(a.work)
	}
	workers.Wait()
}

// work takes volumes from the queue and syncs them until it shuts down;
// the queue hands a volume to one worker at a time.
func (a *Attacher) work() {
	for {
		volume, quit := a.queue.Get()
		if quit {
			return
		}
		if err := a.sync(volume); err != nil {
			a.log.WithError(err).WithField("volume", volume).Warn("Attaching or detaching; retrying")
			a.queue.AddRateLimited(volume)
		} else {
			a.queue.Forget(volume)
		}
		a.queue.Done(volume)
	}
}

// sync gives volume one csi-attacher ticket for each node a live pod using
// it runs on, and takes away the others.
func (a *Attacher) sync(volume string) error {
	ds := a.pod.DataStore
	want := map[string]bool{}
	pods, err := ds.ListPodsRO(corev1.NamespaceAll)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, v := range a.podVolumes(p) {
			if v == volume {
				want[p.Spec.NodeName] = true
			}
		}
	}
	va, err := ds.GetLHVolumeAttachmentByVolumeName(volume)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil // the volume is gone, or not yet made
		}
		return err
	}
	have := map[string]string{}
	for id, t := range va.Spec.AttachmentTickets {
		if t != nil && t.Type == lhv1.AttacherTypeCSIAttacher {
			have[t.NodeID] = id
		}
	}
	for node := range want {
		if _, ok := have[node]; ok {
			continue
		}
		if _, err := a.volumes.Attach(volume, node, false, "", string(lhv1.AttacherTypeCSIAttacher), AttachmentID(volume, node)); err != nil {
			return err
		}
		a.log.Infof("Requested volume %s attached to node %s", volume, node)
	}
	for node, id := range have {
		if want[node] {
			continue
		}
		if _, err := a.volumes.Detach(volume, id, node, false); err != nil {
			return err
		}
		a.log.Infof("Requested volume %s detached from node %s", volume, node)
	}
	return nil
}

// podVolumes returns the Longhorn volumes of p's claims that are bound.
func (a *Attacher) podVolumes(p *corev1.Pod) []string {
	ds := a.pod.DataStore
	var out []string
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		pvc, err := ds.GetPersistentVolumeClaimRO(p.Namespace, v.PersistentVolumeClaim.ClaimName)
		if err != nil || pvc.Spec.VolumeName == "" {
			continue
		}
		pv, err := ds.GetPersistentVolumeRO(pvc.Spec.VolumeName)
		if err != nil || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != lhtypes.LonghornDriverName {
			continue
		}
		out = append(out, pv.Spec.CSI.VolumeHandle)
	}
	return out
}

// AttachmentID is the name kube-controller-manager gives the
// VolumeAttachment of volume on node, which Longhorn's CSI driver uses as
// its attachment ticket's ID.
func AttachmentID(volume, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(volume+lhtypes.LonghornDriverName+node)))
}
