package sandbox

import (
	"context"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/longhorn/diskschedule/internal/scheme"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// FieldOwner is the field manager of what the sandbox applies.
const FieldOwner = "diskschedule-sandbox"

// StorageClassName is the sandbox's Longhorn StorageClass, the default class.
const StorageClassName = "longhorn"

// WaitForFirstConsumerClassName is the sandbox's Longhorn StorageClass of
// WaitForFirstConsumer binding: kube-scheduler picks a pod's node first,
// checking it against the CSIStorageCapacity objects Longhorn's CSI driver
// publishes for this class (none are published for an Immediate class), and
// the volume is provisioned once the node is chosen.
const WaitForFirstConsumerClassName = "longhorn-wffc"

// RenderDeployment builds the kustomization in dir (config/default) as
// `kustomize build` does and returns its objects.
func RenderDeployment(dir string) ([]*unstructured.Unstructured, error) {
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("building the kustomization %s: %w", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("rendering %s: %w", r.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", r.CurId(), err)
		}
		out = append(out, u)
	}
	return out, nil
}

// identities are the ServiceAccounts the deployment runs its workloads as.
type identities struct {
	namespace string
	manager   string
}

// installKinds are the kinds of the deployment the sandbox installs; the
// CRDs come from envtest, and the manager runs in-process instead.
var installKinds = map[string]bool{
	"ServiceAccount": true, "Service": true, "ConfigMap": true, "Secret": true,
	"ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true,
}

// installDeployment creates the deployment's namespace (Longhorn's, which
// the add-on never installs), applies the ServiceAccounts, RBAC, Services
// and ConfigMap of the deployment in dir, and returns the ServiceAccount of
// its manager Deployment.
func installDeployment(ctx context.Context, c client.Client, dir string) (identities, error) {
	objs, err := RenderDeployment(dir)
	if err != nil {
		return identities{}, err
	}
	var ids identities
	for _, u := range objs {
		if u.GetKind() == "Deployment" {
			ids.manager, _, _ = unstructured.NestedString(u.Object, "spec", "template", "spec", "serviceAccountName")
			ids.namespace = u.GetNamespace()
		}
	}
	if ids.manager == "" {
		return identities{}, fmt.Errorf("the deployment in %s names no ServiceAccount for the manager Deployment", dir)
	}
	if err := scheme.EnsureNamespace(ctx, c, ids.namespace); err != nil {
		return identities{}, err
	}
	for _, u := range objs {
		if !installKinds[u.GetKind()] {
			continue
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return identities{}, fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return ids, nil
}

// serviceAccountUser returns the user name and groups the API server
// gives a ServiceAccount's tokens.
func serviceAccountUser(namespace, name string) (string, []string) {
	return "system:serviceaccount:" + namespace + ":" + name,
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + namespace}
}

// StorageClass returns the sandbox's Longhorn StorageClass: one replica,
// best-effort data locality, reclaim Delete, immediate binding, expandable,
// and the default class.
func StorageClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        StorageClassName,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner: simcluster.CSIDriver,
		Parameters: map[string]string{
			simcluster.ParamNumberOfReplicas: "1",
			simcluster.ParamDataLocality:     "best-effort",
		},
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingImmediate),
		AllowVolumeExpansion: ptr.To(true),
	}
}

// WaitForFirstConsumerClass returns the sandbox's Longhorn StorageClass
// WaitForFirstConsumerClassName: StorageClass's parameters with
// WaitForFirstConsumer binding, not the default class.
func WaitForFirstConsumerClass() *storagev1.StorageClass {
	class := StorageClass()
	class.Name = WaitForFirstConsumerClassName
	class.Annotations = nil
	class.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	return class
}

// capacityTracking returns Longhorn's csi-storage-capacity-tracking
// Setting, true, as an administrator sets it to have kube-scheduler check
// the storage capacity Longhorn's CSI driver publishes (Longhorn v1.12's
// default is false).
func capacityTracking() *lhv1.Setting {
	return &lhv1.Setting{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: simcluster.SettingCSIStorageCapacityTracking},
		Value:      "true",
	}
}
