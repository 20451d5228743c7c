package longhornmanager

import (
	"context"
	"fmt"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhtypes "github.com/longhorn/longhorn-manager/types"
	"github.com/longhorn/longhorn-manager/upgrade"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/longhorn/diskschedule/test/infrastructure/longhornpod"
)

// Images are the images longhorn-manager is deployed with (its flags), which
// it writes into its image Settings at start.
type Images struct {
	// Manager is longhorn-manager's own image.
	Manager string
	// Engine is the default engine image.
	Engine string
	// InstanceManager is the default instance manager image.
	InstanceManager string
	// BackingImageManager is the default backing-image manager image.
	BackingImageManager string
	// SupportBundleManager is the support bundle manager image.
	SupportBundleManager string
}

// Initialize does, with Longhorn's own code, what longhorn-manager's daemon
// does at start before it serves: its upgrade path (upgrade.Upgrade, which
// on a new installation writes the crd-api-version Setting), its image
// Settings and customized defaults (DataStore.UpdateCustomizedSettings) and
// the default BackupTarget (CreateOrUpdateDefaultBackupTarget), which
// Longhorn's volume validator requires. The ConfigMaps those read,
// longhorn-default-setting and longhorn-default-resource, are what
// Longhorn's chart deploys, created here empty when missing (no customized
// defaults).
func Initialize(ctx context.Context, pod *longhornpod.Pod, namespace, kubeconfig string, images Images) error {
	if err := upgrade.Upgrade(kubeconfig, pod.Node, images.Manager, false); err != nil {
		return fmt.Errorf("Longhorn's upgrade path: %w", err)
	}
	for name, file := range map[string]string{
		lhtypes.DefaultDefaultSettingConfigMapName:  lhtypes.DefaultSettingYAMLFileName,
		lhtypes.DefaultDefaultResourceConfigMapName: lhtypes.DefaultResourceYAMLFileName,
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: map[string]string{file: ""}}
		if _, err := pod.Kube.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ConfigMap %s: %w", name, err)
		}
	}
	// The datastore reads the ConfigMaps from its informers.
	if err := waitConfigMaps(ctx, pod, namespace); err != nil {
		return err
	}
	ds := pod.DataStore
	settings := map[lhtypes.SettingName]string{
		lhtypes.SettingNameDefaultEngineImage:              images.Engine,
		lhtypes.SettingNameDefaultInstanceManagerImage:     images.InstanceManager,
		lhtypes.SettingNameDefaultBackingImageManagerImage: images.BackingImageManager,
		lhtypes.SettingNameSupportBundleManagerImage:       images.SupportBundleManager,
	}
	if err := ds.UpdateCustomizedSettings(settings); err != nil {
		return fmt.Errorf("writing Longhorn's image settings: %w", err)
	}
	if err := ds.CreateOrUpdateDefaultBackupTarget(); err != nil {
		return fmt.Errorf("creating Longhorn's default backup target: %w", err)
	}
	return nil
}

// waitConfigMaps waits until pod's datastore sees the ConfigMaps Initialize
// created.
func waitConfigMaps(ctx context.Context, pod *longhornpod.Pod, namespace string) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for _, name := range []string{lhtypes.DefaultDefaultSettingConfigMapName, lhtypes.DefaultDefaultResourceConfigMapName} {
			if _, err := pod.DataStore.GetConfigMapRO(namespace, name); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// WaitEngineImage waits until pod's datastore sees image's EngineImage
// deployed, as Longhorn's volume validator requires of a new volume's
// image, or ctx ends.
func WaitEngineImage(ctx context.Context, pod *longhornpod.Pod, image string) error {
	name := lhtypes.GetEngineImageChecksumName(image)
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		ei, err := pod.DataStore.GetEngineImageRO(name)
		return err == nil && ei.Status.State == lhv1.EngineImageStateDeployed, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for engine image %s to be deployed: %w", image, err)
	}
	return nil
}
