package simcluster

import (
	"context"
	"fmt"

	enginemeta "github.com/longhorn/longhorn-engine/pkg/meta"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhtypes "github.com/longhorn/longhorn-manager/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// InstanceManagerImage is the instance manager image of Longhorn v1.12.0,
// the value of its default-instance-manager-image Setting.
const InstanceManagerImage = "longhornio/longhorn-instance-manager:v1.12.0"

// EngineImageObject returns Longhorn's EngineImage of EngineImage as its
// engine image controller keeps it once deployed on nodes: state deployed
// and each node in its nodeDeploymentMap. Longhorn's replica scheduler places
// a replica only on nodes where its engine image is deployed.
func EngineImageObject(namespace string, nodes []string) *lhv1.EngineImage {
	deployed := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		deployed[n] = true
	}
	return &lhv1.EngineImage{
		ObjectMeta: metav1.ObjectMeta{Name: lhtypes.GetEngineImageChecksumName(EngineImage), Namespace: namespace},
		Spec:       lhv1.EngineImageSpec{Image: EngineImage},
		Status: lhv1.EngineImageStatus{
			State: lhv1.EngineImageStateDeployed, NodeDeploymentMap: deployed,
			// What the engine image's "longhorn version" reports, which
			// Longhorn's engine image controller copies here and its
			// volume validator checks: longhorn-engine v1.12.0's own API
			// and data format versions.
			EngineVersionDetails: lhv1.EngineVersionDetails{
				Version:                 "v1.12.0",
				CLIAPIVersion:           enginemeta.CLIAPIVersion,
				CLIAPIMinVersion:        enginemeta.CLIAPIMinVersion,
				ControllerAPIVersion:    enginemeta.ControllerAPIVersion,
				ControllerAPIMinVersion: enginemeta.ControllerAPIMinVersion,
				DataFormatVersion:       enginemeta.DataFormatVersion,
				DataFormatMinVersion:    enginemeta.DataFormatMinVersion,
			},
			Conditions: []lhv1.Condition{{Type: lhv1.EngineImageConditionTypeReady, Status: lhv1.ConditionStatusTrue}},
		},
	}
}

// createWithStatus creates obj (when missing) and then writes the status it
// carries through the status subresource, as Longhorn's controllers write
// status after creating an object.
func createWithStatus(ctx context.Context, c client.Client, obj client.Object, copyStatus func(from, to client.Object)) error {
	want := obj.DeepCopyObject().(client.Object)
	if err := c.Create(ctx, obj); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
	}
	copyStatus(want, obj)
	if err := c.Status().Update(ctx, obj); err != nil {
		return fmt.Errorf("writing the status of %s: %w", obj.GetName(), err)
	}
	return nil
}

// createInstances creates the deployed engine image and the
// default-instance-manager-image and default-engine-image Settings; Longhorn's
// node controller creates the instance managers from them.
func createInstances(ctx context.Context, s *sim) error {
	setting := &lhv1.Setting{
		ObjectMeta: metav1.ObjectMeta{Name: string(lhtypes.SettingNameDefaultInstanceManagerImage), Namespace: s.namespace},
		Value:      InstanceManagerImage,
	}
	if err := createIfMissing(ctx, s, setting); err != nil {
		return fmt.Errorf("creating setting %s: %w", setting.Name, err)
	}
	// longhorn-manager sets its default engine image at start; its volume
	// controller gives new volumes that image.
	engineImage := &lhv1.Setting{
		ObjectMeta: metav1.ObjectMeta{Name: string(lhtypes.SettingNameDefaultEngineImage), Namespace: s.namespace},
		Value:      EngineImage,
	}
	if err := createIfMissing(ctx, s, engineImage); err != nil {
		return fmt.Errorf("creating setting %s: %w", engineImage.Name, err)
	}
	names := make([]string, 0, len(s.nodes))
	for _, n := range s.nodes {
		names = append(names, n.Name)
	}
	ei := EngineImageObject(s.namespace, names)
	err := createWithStatus(ctx, s.client, ei, func(from, to client.Object) {
		to.(*lhv1.EngineImage).Status = from.(*lhv1.EngineImage).Status
	})
	if err != nil {
		return fmt.Errorf("creating engine image %s: %w", ei.Name, err)
	}
	return nil
}
