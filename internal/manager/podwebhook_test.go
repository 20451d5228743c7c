package manager_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/gate"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/podmutator"
	"github.com/longhorn/diskschedule/test/framework/managertest"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/controlplane"
)

// TestPodWebhook registers diskschedule-pods as config/webhook ships it,
// pointed at a manager that serves it with the second scheduler deployed,
// and creates pods through the API server: a pod with a Longhorn claim in a
// labelled namespace gets the extender's resource and the second scheduler;
// the same pod in an unlabelled namespace, a pod labelled disabled, a pod
// of another driver's claim and a pod whose claim does not exist yet are
// created as they were written.
func TestPodWebhook(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	ns := env.NewNamespace(t)
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gate.DefaultSecretName}}); err != nil {
		t.Fatal(err)
	}
	port, err := controlplane.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	mwc, err := podmutator.LocalConfiguration("https://localhost:" + strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, mwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), mwc) })

	longhorn := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-longhorn"}, Provisioner: podmutator.CSIDriver}
	other := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-ebs"}, Provisioner: "ebs.csi.aws.com"}
	apps, plain := ns+"-apps", ns+"-plain"
	objs := []client.Object{longhorn, other,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: apps, Labels: map[string]string{podmutator.NamespaceLabel: "enabled"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: plain}},
	}
	for _, n := range []string{apps, plain} {
		objs = append(objs, podWebhookClaim(n, "data", longhorn.Name), podWebhookClaim(n, "logs", other.Name))
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), longhorn)
		_ = c.Delete(context.Background(), other)
	})

	rm, err := managertest.Start(env, env.Config, manager.Options{
		Namespace: ns,
		Gate: &manager.GateOptions{Host: "127.0.0.1", Port: port, TLS: gate.TLS{
			DNSName: "localhost", CertDir: t.TempDir(), ControllerName: gate.DefaultControllerName + "-" + ns}},
		SecondaryScheduler: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rm.Stop() })

	// The manager serves once its rotator injected the CA into the
	// configuration: a dry run shows when.
	testenv.Eventually(t, ctx, time.Minute, "the pod webhook answers", func(ctx context.Context) (bool, string, error) {
		p := podWebhookPod(apps, "probe", "data")
		if err := c.Create(ctx, p, client.DryRunAll); err != nil {
			return false, "", err
		}
		return p.Spec.SchedulerName == podmutator.SchedulerName, "schedulerName " + p.Spec.SchedulerName, nil
	})

	disabled := podWebhookPod(apps, "disabled", "data")
	disabled.Labels = map[string]string{podmutator.NamespaceLabel: "disabled"}
	for _, tt := range []struct {
		pod      *corev1.Pod
		mutated  bool
		doesWhat string
	}{
		{podWebhookPod(apps, "web", "data"), true, "a Longhorn claim in a labelled namespace"},
		{podWebhookPod(plain, "web", "data"), false, "a Longhorn claim in an unlabelled namespace"},
		{disabled, false, "a pod labelled disabled"},
		{podWebhookPod(apps, "logs", "logs"), false, "another driver's claim"},
		{podWebhookPod(apps, "early", "not-yet"), false, "a claim that does not exist yet"},
	} {
		if err := c.Create(ctx, tt.pod); err != nil {
			t.Fatalf("%s: creating the pod: %v", tt.doesWhat, err)
		}
		got := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(tt.pod), got); err != nil {
			t.Fatal(err)
		}
		app := got.Spec.Containers[0].Resources
		req, lim := app.Requests[podmutator.ExtendedResource], app.Limits[podmutator.ExtendedResource]
		if tt.mutated {
			if req.String() != "1" || lim.String() != "1" || got.Spec.SchedulerName != podmutator.SchedulerName {
				t.Errorf("%s: requests %v, limits %v, scheduler %q; want %s 1 and %s", tt.doesWhat, app.Requests, app.Limits,
					got.Spec.SchedulerName, podmutator.ExtendedResource, podmutator.SchedulerName)
			}
			if sidecar := got.Spec.Containers[1].Resources; len(sidecar.Requests) != 0 || len(sidecar.Limits) != 0 {
				t.Errorf("%s: the second container got %v", tt.doesWhat, sidecar)
			}
			continue
		}
		if !req.IsZero() || !lim.IsZero() || got.Spec.SchedulerName != corev1.DefaultSchedulerName {
			t.Errorf("%s: requests %v, limits %v, scheduler %q; want the pod as written", tt.doesWhat, app.Requests, app.Limits, got.Spec.SchedulerName)
		}
	}
}

func podWebhookClaim(namespace, name, class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class),
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: apiresource.MustParse("1Gi")}}}}
}

// podWebhookPod is a pod of two containers mounting claim.
func podWebhookPod(namespace, name, claim string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{
				{Name: "app", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}},
				{Name: "sidecar", Image: "busybox"},
			},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		}}
}
