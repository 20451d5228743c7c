package sandbox

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/longhorn/diskschedule/internal/dataplane"
)

// FieldOwner is the field manager of what the sandbox applies.
const FieldOwner = "diskschedule-sandbox"

// StorageClassName is the sandbox's Longhorn StorageClass, the default class.
const StorageClassName = "longhorn"

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
	namespace   string
	manager     string
	diskMonitor string
}

// installKinds are the kinds of the deployment the sandbox installs; the
// CRDs come from envtest, and the workloads run in-process instead.
var installKinds = map[string]bool{
	"Namespace": true, "ServiceAccount": true, "Service": true,
	"ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true,
}

// installDeployment applies the namespace, ServiceAccounts, RBAC and
// Service of the deployment in dir, and returns the ServiceAccounts of its
// manager Deployment and disk monitor DaemonSet.
func installDeployment(ctx context.Context, c client.Client, dir string) (identities, error) {
	objs, err := RenderDeployment(dir)
	if err != nil {
		return identities{}, err
	}
	var ids identities
	// Namespaces first: the namespaced objects go into them.
	for _, pass := range []func(kind string) bool{
		func(kind string) bool { return kind == "Namespace" },
		func(kind string) bool { return kind != "Namespace" && installKinds[kind] },
	} {
		for _, u := range objs {
			if !pass(u.GetKind()) {
				continue
			}
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
				return identities{}, fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
			}
		}
	}
	for _, u := range objs {
		sa, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "serviceAccountName")
		switch u.GetKind() {
		case "Deployment":
			ids.manager, ids.namespace = sa, u.GetNamespace()
		case "DaemonSet":
			ids.diskMonitor = sa
		}
	}
	if ids.manager == "" || ids.diskMonitor == "" {
		return identities{}, fmt.Errorf("the deployment in %s names no ServiceAccount for the manager Deployment or the disk monitor DaemonSet", dir)
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
		Provisioner: dataplane.CSIDriver,
		Parameters: map[string]string{
			dataplane.ParamNumberOfReplicas: "1",
			dataplane.ParamDataLocality:     "best-effort",
		},
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingImmediate),
		AllowVolumeExpansion: ptr.To(true),
	}
}

// createTopology creates each node's Kubernetes Node and Longhorn Node.
// The data plane's kubelet makes the Kubernetes Nodes Ready; the disk
// monitors measure the Longhorn Nodes' disks.
func createTopology(ctx context.Context, c client.Client, t *Topology, namespace string) error {
	for _, n := range t.Nodes {
		for _, obj := range []client.Object{n.KubeNode(), n.LonghornNode(namespace)} {
			if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating %s %s: %w", strings.TrimPrefix(fmt.Sprintf("%T", obj), "*"), n.Name, err)
			}
		}
	}
	return nil
}
