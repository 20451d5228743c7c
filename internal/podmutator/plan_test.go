package podmutator

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// pod is a pod as kube-apiserver hands it to a mutating webhook: defaulted
// (schedulerName default-scheduler), with one container per name and one
// claim volume per claim.
func pod(containers []string, claims ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "apps"},
		Spec: corev1.PodSpec{SchedulerName: corev1.DefaultSchedulerName}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "busybox"})
	}
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}})
	return p
}

func claim(class string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "apps"}}
	if class != "" {
		c.Spec.StorageClassName = ptr.To(class)
	}
	return c
}

func csiVolume(driver string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1"}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "pvc-1"}}}}
}

func TestClassifyClaim(t *testing.T) {
	longhorn := ClassInfo{Found: true, Provisioner: CSIDriver}
	for _, c := range []struct {
		name  string
		pvc   *corev1.PersistentVolumeClaim
		class ClassInfo
		pv    *corev1.PersistentVolume
		want  ClaimKind
	}{
		{"a claim of a Longhorn class", claim("longhorn"), longhorn, nil, ClaimLonghorn},
		{"a claim not created yet", nil, ClassInfo{}, nil, ClaimMissing},
		{"a claim of a class that does not exist", claim("gone"), ClassInfo{}, nil, ClaimClassMissing},
		{"a claim of another driver's class", claim("ebs"), ClassInfo{Found: true, Provisioner: "ebs.csi.aws.com"}, nil, ClaimOther},
		{"a claim of no class", claim(""), ClassInfo{}, nil, ClaimOther},
		{"a claim of no class bound to a Longhorn volume", claim(""), ClassInfo{}, csiVolume(CSIDriver), ClaimLonghorn},
		{"a claim of a Longhorn class bound to another driver's volume", claim("longhorn"), longhorn, csiVolume("ebs.csi.aws.com"), ClaimOther},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ClassifyClaim("data", c.pvc, c.class, c.pv)
			if got.Kind != c.want || got.Detail == "" {
				t.Errorf("ClassifyClaim = %+v, want kind %d with a detail", got, c.want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	lh := Claim{Name: "data", Kind: ClaimLonghorn, Detail: "StorageClass longhorn"}
	other := Claim{Name: "logs", Kind: ClaimOther, Detail: "StorageClass ebs of provisioner ebs.csi.aws.com"}
	missing := Claim{Name: "data", Kind: ClaimMissing, Detail: "the claim does not exist"}
	noClass := Claim{Name: "data", Kind: ClaimClassMissing, Detail: "StorageClass gone does not exist"}
	withResource := pod([]string{"app", "sidecar"}, "data")
	one := corev1.ResourceList{ExtendedResource: resource.MustParse("1")}
	withResource.Spec.Containers[1].Resources.Limits = one
	custom := pod([]string{"app"}, "data")
	custom.Spec.SchedulerName = "my-scheduler"
	for _, c := range []struct {
		name      string
		pod       *corev1.Pod
		claims    []Claim
		secondary bool
		want      Plan
	}{
		{"a Longhorn claim, one scheduler", pod([]string{"app"}, "data"), []Claim{lh}, false,
			Plan{Result: ResultMutated, AddResource: true}},
		{"a Longhorn claim, the second scheduler", pod([]string{"app"}, "data"), []Claim{lh}, true,
			Plan{Result: ResultMutated, AddResource: true, SetScheduler: true}},
		{"a Longhorn claim among others", pod([]string{"app"}, "logs", "data"), []Claim{other, lh}, true,
			Plan{Result: ResultMutated, AddResource: true, SetScheduler: true}},
		{"a container asks already", withResource, []Claim{lh}, false, Plan{Result: ResultUnchanged}},
		{"a container asks already, the second scheduler", withResource, []Claim{lh}, true,
			Plan{Result: ResultMutated, SetScheduler: true}},
		{"a scheduler of the pod's own", custom, []Claim{lh}, true, Plan{Result: ResultMutated, AddResource: true}},
		{"another driver's claim", pod([]string{"app"}, "logs"), []Claim{other}, true, Plan{Result: ResultNotLonghorn}},
		{"a claim not created yet", pod([]string{"app"}, "data"), []Claim{missing}, true, Plan{Result: ResultClaimMissing}},
		{"a claim whose class does not exist", pod([]string{"app"}, "data"), []Claim{noClass}, true, Plan{Result: ResultClaimMissing}},
		{"no claim", pod([]string{"app"}), nil, true, Plan{Result: ResultNotLonghorn}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Decide(c.pod, c.claims, c.secondary)
			if got.Reason == "" {
				t.Errorf("Decide gives no reason: %+v", got)
			}
			got.Reason = ""
			if got != c.want {
				t.Errorf("Decide = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestApply(t *testing.T) {
	p := pod([]string{"app", "sidecar"}, "data")
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	Plan{Result: ResultMutated, AddResource: true, SetScheduler: true}.Apply(p)
	app := p.Spec.Containers[0].Resources
	if q := app.Requests[ExtendedResource]; q.String() != "1" {
		t.Errorf("requests %v, want %s: 1", app.Requests, ExtendedResource)
	}
	if q := app.Limits[ExtendedResource]; q.String() != "1" {
		t.Errorf("limits %v, want %s: 1", app.Limits, ExtendedResource)
	}
	if q := app.Requests[corev1.ResourceCPU]; q.String() != "100m" {
		t.Errorf("the container's own requests were lost: %v", app.Requests)
	}
	if len(p.Spec.Containers[1].Resources.Requests) != 0 {
		t.Errorf("the second container got %v", p.Spec.Containers[1].Resources.Requests)
	}
	if p.Spec.SchedulerName != SchedulerName {
		t.Errorf("schedulerName %q, want %s", p.Spec.SchedulerName, SchedulerName)
	}
}
