package longhorn_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// TestClaimsProvisionedThroughLonghornsAPI: the sandbox's CSI provisioner
// calls Longhorn's own CSI controller server (CreateVolume, DeleteVolume),
// which creates a claim's volume through Longhorn's REST API, so Longhorn's
// driver, API and webhooks decide: a 1 MiB
// ReadWriteOncePod claim becomes a 10 MiB (Longhorn's minimal size) rwop
// volume with its class's staleReplicaTimeout, whose PersistentVolume has
// Longhorn's size; a class selecting a disk tag no disk has is refused by
// Longhorn's API, whose message the claim's ProvisioningFailed Event
// carries; a deleted claim's volume is deleted through the driver.
func TestClaimsProvisionedThroughLonghornsAPI(t *testing.T) {
	sb := sandboxtest.Start(t, sandboxtest.Options{Sandbox: sandbox.Options{Topology: sandboxtest.Nodes(3, 100*gib)}, TailLogs: []string{"longhorn-manager.log"}})
	c := sb.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	class := func(name string, params map[string]string) *storagev1.StorageClass {
		return &storagev1.StorageClass{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: simcluster.CSIDriver, Parameters: params,
			ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete), VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
		}
	}
	claim := func(name, class string, mode corev1.PersistentVolumeAccessMode, size string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{mode}, StorageClassName: ptr.To(class),
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			},
		}
	}
	for _, o := range []client.Object{
		class("api-small", map[string]string{"numberOfReplicas": "1", "staleReplicaTimeout": "30"}),
		class("api-missing-tag", map[string]string{"numberOfReplicas": "1", "diskSelector": "no-such-tag"}),
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	small := claim("small", "api-small", corev1.ReadWriteOncePod, "1Mi")
	refused := claim("refused", "api-missing-tag", corev1.ReadWriteOnce, "1Gi")
	for _, pvc := range []*corev1.PersistentVolumeClaim{small, refused} {
		if err := c.Create(ctx, pvc); err != nil {
			t.Fatal(err)
		}
	}

	const minimal = 10 << 20 // Longhorn's util.MinimalVolumeSize
	testenv.Eventually(t, ctx, 2*time.Minute, "claim small bound", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(small), small); err != nil {
			return false, "", err
		}
		return small.Status.Phase == corev1.ClaimBound, string(small.Status.Phase), nil
	})
	name := simcluster.VolumeName(small)
	vol := &lhv1.Volume{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: name}, vol); err != nil {
		t.Fatal(err)
	}
	if vol.Spec.Size != minimal || vol.Spec.AccessMode != lhv1.AccessModeReadWriteOncePod || vol.Spec.StaleReplicaTimeout != 30 || vol.Spec.NumberOfReplicas != 1 {
		t.Errorf("volume %s: size %d, access mode %s, staleReplicaTimeout %d, %d replicas; want %d, rwop, 30, 1 (what Longhorn's CSI driver asks of its API)",
			name, vol.Spec.Size, vol.Spec.AccessMode, vol.Spec.StaleReplicaTimeout, vol.Spec.NumberOfReplicas, minimal)
	}
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKey{Name: small.Spec.VolumeName}, pv); err != nil {
		t.Fatal(err)
	}
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; pv.Name != name || got.Value() != minimal {
		t.Errorf("PersistentVolume %s of capacity %s; want %s of %d bytes, Longhorn's size", pv.Name, got.String(), name, minimal)
	}

	testenv.Eventually(t, ctx, 2*time.Minute, "claim refused has Longhorn's refusal in a ProvisioningFailed Event", func(ctx context.Context) (bool, string, error) {
		events := &corev1.EventList{}
		if err := c.List(ctx, events, client.InNamespace("default")); err != nil {
			return false, "", err
		}
		var seen []string
		for _, e := range events.Items {
			if e.InvolvedObject.Name != refused.Name || e.Reason != "ProvisioningFailed" {
				continue
			}
			if strings.Contains(e.Message, "specified disk tag no-such-tag does not exist") {
				return true, e.Message, nil
			}
			seen = append(seen, e.Message)
		}
		return false, strings.Join(seen, "; "), nil
	})
	if err := c.Get(ctx, client.ObjectKeyFromObject(refused), refused); err != nil || refused.Status.Phase != corev1.ClaimPending {
		t.Errorf("claim refused: phase %s, %v; want Pending", refused.Status.Phase, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: simcluster.VolumeName(refused)}, &lhv1.Volume{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused claim's volume: %v; want none", err)
	}

	if err := c.Delete(ctx, small); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, ctx, 2*time.Minute, "volume "+name+" and its PersistentVolume deleted", func(ctx context.Context) (bool, string, error) {
		errVol := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: name}, &lhv1.Volume{})
		errPV := c.Get(ctx, client.ObjectKey{Name: name}, &corev1.PersistentVolume{})
		return apierrors.IsNotFound(errVol) && apierrors.IsNotFound(errPV), fmt.Sprintf("volume: %v; PersistentVolume: %v", errVol, errPV), nil
	})
}
