package placement_test

import (
	"fmt"

	"github.com/longhorn/longhorn-manager/datastore"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/longhorn/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/longhorn/longhorn-manager/scheduler"
	lhtypes "github.com/longhorn/longhorn-manager/types"
	lhutil "github.com/longhorn/longhorn-manager/util"
	corev1 "k8s.io/api/core/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/longhorn/diskschedule/internal/conditions"
)

// Names of the Longhorn system the differential test builds.
const (
	longhornNamespace    = "longhorn-system"
	engineImage          = "longhornio/longhorn-engine:v1.12.0"
	instanceManagerImage = "longhornio/longhorn-instance-manager:v1.12.0"
)

// longhornScheduler is Longhorn v1.12.0's own ReplicaScheduler over its own
// DataStore, whose informers read Longhorn's fake clientsets. The test
// never starts the informers: it fills their indexers directly, as
// Longhorn's own scheduler tests do (scheduler/replica_scheduler_test.go),
// and replaces their contents for each cluster state, so one datastore
// serves every state.
type longhornScheduler struct {
	rcs *scheduler.ReplicaScheduler

	nodes, settings, instanceManagers, engineImages, volumes, replicas, kubeNodes cache.Indexer
}

// newLonghornScheduler builds the datastore and the scheduler.
func newLonghornScheduler() *longhornScheduler {
	kube := kubefake.NewClientset()
	lh := lhfake.NewSimpleClientset() //nolint:staticcheck // Longhorn generates no NewClientset with apply configurations.
	ext := apiextensionsfake.NewClientset()
	factories := lhutil.NewInformerFactories(longhornNamespace, kube, lh, 0)
	ds := datastore.NewDataStore(longhornNamespace, lh, kube, ext, factories)
	lhi := factories.LhInformerFactory.Longhorn().V1beta2()
	return &longhornScheduler{
		rcs:              scheduler.NewReplicaScheduler(ds),
		nodes:            lhi.Nodes().Informer().GetIndexer(),
		settings:         lhi.Settings().Informer().GetIndexer(),
		instanceManagers: lhi.InstanceManagers().Informer().GetIndexer(),
		engineImages:     lhi.EngineImages().Informer().GetIndexer(),
		volumes:          lhi.Volumes().Informer().GetIndexer(),
		replicas:         lhi.Replicas().Informer().GetIndexer(),
		kubeNodes:        factories.KubeInformerFactory.Core().V1().Nodes().Informer().GetIndexer(),
	}
}

// load replaces the datastore's contents with st's objects, and with what
// Longhorn's scheduler needs besides on every node: a running default
// instance manager of each data engine and the engine image deployed.
func (l *longhornScheduler) load(st *clusterState) error {
	var nodes, kubeNodes, ims, settings, replicas []any
	deployed := map[string]bool{}
	for _, n := range st.nodes {
		nodes = append(nodes, n)
		kubeNodes = append(kubeNodes, st.kubeNode(n))
		for _, engine := range []lhv1.DataEngineType{lhv1.DataEngineTypeV1, lhv1.DataEngineTypeV2} {
			ims = append(ims, instanceManager(n.Name, engine))
		}
		deployed[n.Name] = true
	}
	for name, value := range st.settings {
		settings = append(settings, &lhv1.Setting{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: longhornNamespace},
			Value:      value,
		})
	}
	for _, r := range st.replicas {
		replicas = append(replicas, r)
	}
	ei := &lhv1.EngineImage{
		ObjectMeta: metav1.ObjectMeta{Name: lhtypes.GetEngineImageChecksumName(engineImage), Namespace: longhornNamespace},
		Spec:       lhv1.EngineImageSpec{Image: engineImage},
		Status:     lhv1.EngineImageStatus{State: lhv1.EngineImageStateDeployed, NodeDeploymentMap: deployed},
	}
	for _, step := range []struct {
		what    string
		indexer cache.Indexer
		objects []any
	}{
		{"nodes", l.nodes, nodes},
		{"Kubernetes nodes", l.kubeNodes, kubeNodes},
		{"instance managers", l.instanceManagers, ims},
		{"engine images", l.engineImages, []any{ei}},
		{"settings", l.settings, settings},
		{"volumes", l.volumes, []any{st.volume}},
		{"replicas", l.replicas, replicas},
	} {
		if err := step.indexer.Replace(step.objects, ""); err != nil {
			return fmt.Errorf("loading the %s into Longhorn's datastore: %w", step.what, err)
		}
	}
	return nil
}

// candidates returns the disks Longhorn's scheduler finds for one new
// replica of vol (FindDiskCandidates) pinned to pin ("": none), given the
// volume's replicas, as "node/diskUUID" keys, and the scheduler's errors.
func (l *longhornScheduler) candidates(vol *lhv1.Volume, replicas []*lhv1.Replica, pin string) (map[string]bool, string) {
	r := newReplica(vol, "new")
	r.Spec.HardNodeAffinity = pin
	all := map[string]*lhv1.Replica{r.Name: r}
	for _, e := range replicas {
		all[e.Name] = e
	}
	found, errs := l.rcs.FindDiskCandidates(r, all, vol)
	out := make(map[string]bool, len(found))
	for uuid, d := range found {
		out[d.NodeID+"/"+uuid] = true
	}
	return out, errs.Error()
}

// instanceManager returns node's default instance manager of data engine
// engine, running, labelled as Longhorn labels it.
func instanceManager(node string, engine lhv1.DataEngineType) *lhv1.InstanceManager {
	return &lhv1.InstanceManager{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("instance-manager-%s-%s", node, engine),
			Namespace: longhornNamespace,
			Labels:    lhtypes.GetInstanceManagerLabels(node, instanceManagerImage, lhv1.InstanceManagerTypeAllInOne, engine),
		},
		Spec: lhv1.InstanceManagerSpec{
			Image: instanceManagerImage, NodeID: node, Type: lhv1.InstanceManagerTypeAllInOne, DataEngine: engine,
		},
		Status: lhv1.InstanceManagerStatus{CurrentState: lhv1.InstanceManagerStateRunning},
	}
}

// newReplica returns an unscheduled replica of vol as Longhorn's volume
// controller creates it.
func newReplica(vol *lhv1.Volume, suffix string) *lhv1.Replica {
	return &lhv1.Replica{
		ObjectMeta: metav1.ObjectMeta{
			Name:      vol.Name + "-r-" + suffix,
			Namespace: longhornNamespace,
			Labels:    map[string]string{lhtypes.LonghornLabelVolume: vol.Name},
		},
		Spec: lhv1.ReplicaSpec{
			InstanceSpec: lhv1.InstanceSpec{
				VolumeName: vol.Name, VolumeSize: vol.Spec.Size, Image: vol.Spec.Image,
				DataEngine: vol.Spec.DataEngine, DesireState: lhv1.InstanceStateStopped,
			},
			Active: true,
		},
	}
}

// kubeNode returns the Kubernetes node of Longhorn node n: its zone label,
// its cordon and its Ready condition.
func (st *clusterState) kubeNode(n *lhv1.Node) *corev1.Node {
	ready := corev1.ConditionTrue
	if !conditions.LonghornTrue(n.Status.Conditions, lhv1.NodeConditionTypeReady) {
		ready = corev1.ConditionFalse
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{corev1.LabelTopologyZone: n.Status.Zone}},
		Spec:       corev1.NodeSpec{Unschedulable: st.cordoned[n.Name]},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}},
	}
}
