package simcluster

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// TestProvisionerAnswersForBlockAndClaims: the provision controller asks
// the provisioner it is made with whether it supports block volumes (a
// block claim is refused otherwise, as KubeVirt's migratable disks are)
// and whether to provision a claim, by interface; before and after the
// capacity controller's wrapper is set, the sidecars' provisioner answers
// as csiProvisioner does.
func TestProvisionerAnswersForBlockAndClaims(t *testing.T) {
	ctx := context.Background()
	p := &csiProvisioner{}
	p.withCapacity.wrapped = p
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm-disk"}}
	check := func(when string) {
		t.Helper()
		var made controller.Provisioner = &p.withCapacity
		block, ok := made.(controller.BlockProvisioner)
		if !ok || !block.SupportsBlock(ctx) {
			t.Errorf("%s: the provision controller's provisioner must support block volumes (answers: %t)", when, ok)
		}
		qualifier, ok := made.(controller.Qualifier)
		if !ok || qualifier.ShouldProvision(ctx, claim) != p.ShouldProvision(ctx, claim) {
			t.Errorf("%s: the provision controller's provisioner must answer ShouldProvision as csiProvisioner (answers: %t)", when, ok)
		}
	}
	check("before the capacity controller")
	if err := p.withCapacity.set(p, nil); err != nil {
		t.Fatal(err)
	}
	check("with the capacity controller's wrapper")
}
