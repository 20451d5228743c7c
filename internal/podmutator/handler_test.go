package podmutator

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr/funcr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// handlerFixture is a handler over a cache and an API server of its own,
// with the log lines it wrote.
type handlerFixture struct {
	h     *Handler
	lines *testenv.LockedBuffer
}

func newHandler(t *testing.T, secondary bool, cached, api []client.Object) handlerFixture {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	lines := &testenv.LockedBuffer{}
	log := funcr.New(func(prefix, args string) { _, _ = lines.Write([]byte(args + "\n")) }, funcr.Options{})
	h, err := NewHandler(Options{
		Cache:              fake.NewClientBuilder().WithScheme(s).WithObjects(cached...).Build(),
		API:                fake.NewClientBuilder().WithScheme(s).WithObjects(api...).Build(),
		Decoder:            admission.NewDecoder(s),
		SecondaryScheduler: secondary,
		Log:                log,
	})
	if err != nil {
		t.Fatal(err)
	}
	return handlerFixture{h: h, lines: lines}
}

func createRequest(t *testing.T, p *corev1.Pod) admission.Request {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "uid-1", Operation: admissionv1.Create, Namespace: p.Namespace, Name: p.Name,
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Object:   runtime.RawExtension{Raw: raw},
	}}
}

// patched applies the response's JSON patch to p as kube-apiserver does.
func patched(t *testing.T, p *corev1.Pod, resp admission.Response) *corev1.Pod {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Patches) == 0 {
		return p
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patch type %v, want JSONPatch", resp.PatchType)
	}
	ops, err := json.Marshal(resp.Patches)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		t.Fatalf("decoding the patch %s: %v", ops, err)
	}
	out, err := patch.Apply(raw)
	if err != nil {
		t.Fatalf("applying the patch %s: %v", ops, err)
	}
	got := &corev1.Pod{}
	if err := json.Unmarshal(out, got); err != nil {
		t.Fatal(err)
	}
	return got
}

func storageClass(name, provisioner string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner}
}

func namedClaim(name, class string) *corev1.PersistentVolumeClaim {
	c := claim(class)
	c.Name = name
	return c
}

// TestHandle answers pods as kube-apiserver sends them: always allowed, a
// JSON patch that kube-apiserver can apply for a pod with a Longhorn claim,
// none otherwise, and a log line for a pod whose claim or class is missing.
func TestHandle(t *testing.T) {
	longhorn, ebs := storageClass("longhorn", CSIDriver), storageClass("ebs", "ebs.csi.aws.com")
	objects := []client.Object{longhorn, ebs, namedClaim("data", "longhorn"), namedClaim("logs", "ebs"), namedClaim("orphan", "gone")}
	for _, c := range []struct {
		name          string
		pod           *corev1.Pod
		secondary     bool
		cached, api   []client.Object
		wantResource  bool
		wantScheduler string
		wantLog       string
	}{
		{name: "a Longhorn claim", pod: pod([]string{"app"}, "data"), cached: objects, api: objects,
			wantResource: true, wantScheduler: corev1.DefaultSchedulerName},
		{name: "a Longhorn claim, the second scheduler", pod: pod([]string{"app"}, "data"), secondary: true, cached: objects, api: objects,
			wantResource: true, wantScheduler: SchedulerName},
		{name: "a claim the cache does not hold yet", pod: pod([]string{"app"}, "data"), secondary: true, api: objects,
			wantResource: true, wantScheduler: SchedulerName},
		{name: "another driver's claim", pod: pod([]string{"app"}, "logs"), secondary: true, cached: objects, api: objects,
			wantScheduler: corev1.DefaultSchedulerName, wantLog: "StorageClass ebs of provisioner ebs.csi.aws.com"},
		{name: "a claim not created yet", pod: pod([]string{"app"}, "missing"), secondary: true, cached: objects, api: objects,
			wantScheduler: corev1.DefaultSchedulerName, wantLog: "missing: the claim does not exist"},
		{name: "a claim whose StorageClass does not exist", pod: pod([]string{"app"}, "orphan"), secondary: true, cached: objects, api: objects,
			wantScheduler: corev1.DefaultSchedulerName, wantLog: "StorageClass gone does not exist"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newHandler(t, c.secondary, c.cached, c.api)
			resp := f.h.Handle(context.Background(), createRequest(t, c.pod))
			if !resp.Allowed {
				t.Fatalf("the pod was refused: %+v", resp.Result)
			}
			got := patched(t, c.pod, resp)
			_, has := got.Spec.Containers[0].Resources.Requests[ExtendedResource]
			_, limited := got.Spec.Containers[0].Resources.Limits[ExtendedResource]
			if has != c.wantResource || limited != c.wantResource {
				t.Errorf("requests %v, limits %v; want %s: %v", got.Spec.Containers[0].Resources.Requests,
					got.Spec.Containers[0].Resources.Limits, ExtendedResource, c.wantResource)
			}
			if got.Spec.SchedulerName != c.wantScheduler {
				t.Errorf("schedulerName %q, want %q", got.Spec.SchedulerName, c.wantScheduler)
			}
			if !c.wantResource && len(resp.Patches) != 0 {
				t.Errorf("a pod left as it is got a patch: %v", resp.Patches)
			}
			if c.wantLog != "" && !strings.Contains(f.lines.String(), c.wantLog) {
				t.Errorf("the log says %q, want a line saying %q", f.lines.String(), c.wantLog)
			}
		})
	}
}

// TestHandleNeverRefuses allows what it cannot read.
func TestHandleNeverRefuses(t *testing.T) {
	f := newHandler(t, true, nil, nil)
	garbage := createRequest(t, pod([]string{"app"}, "data"))
	garbage.Object.Raw = []byte(`{"spec": 7}`)
	update := createRequest(t, pod([]string{"app"}, "data"))
	update.Operation = admissionv1.Update
	for name, req := range map[string]admission.Request{"a pod that does not decode": garbage, "an update": update} {
		if resp := f.h.Handle(context.Background(), req); !resp.Allowed || len(resp.Patches) != 0 {
			t.Errorf("%s: allowed %v with patches %v, want allowed without", name, resp.Allowed, resp.Patches)
		}
	}
	if got := f.lines.String(); !strings.Contains(got, "error") {
		t.Errorf("no log line says the pod could not be read: %q", got)
	}
}
