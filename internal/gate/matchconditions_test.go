package gate

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	celplugin "k8s.io/apiserver/pkg/admission/plugin/cel"
	apiserverwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/longhorn/diskschedule/internal/controller/backingimage"
	"github.com/longhorn/diskschedule/internal/controller/replica"
	"github.com/longhorn/diskschedule/internal/controller/volume"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

const gi = int64(1) << 30

// write is one write of Longhorn's to one of its objects: old is nil for
// a CREATE.
type write struct {
	name     string
	resource string
	old, obj runtime.Object
	// deliberate, when set, says why the webhook configuration sends the
	// write to the gate though the Go predicate says it takes no space (the
	// gate then admits it at once); the test checks they do differ.
	deliberate string
}

// TestMatchConditionsAgreeWithTakesSpace holds the webhook configuration's
// matchConditions (CEL, as config/webhook ships them) against each kind's
// Go predicate of a write that takes space (replica.TakesSpace,
// volume.TakesSpace, backingimage.TakesSpace) on Longhorn-shaped writes.
// The expressions are compiled and evaluated with kube-apiserver's own
// matchConditions code (k8s.io/apiserver's webhook accessor and CEL
// condition compiler), on the objects as their JSON reaches it, and a
// write an operation the webhook's rules do not name is not sent at all.
// Every write the Go predicate says takes space must reach the gate; one
// that reaches it and takes none is named here as deliberate.
func TestMatchConditionsAgreeWithTakesSpace(t *testing.T) {
	const ns = "longhorn-system"
	vwc, err := LocalConfiguration("https://localhost:1", ns)
	if err != nil {
		t.Fatal(err)
	}
	compiler := celplugin.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	hooks := map[string]*admissionregistrationv1.ValidatingWebhook{}
	for i := range vwc.Webhooks {
		wh := &vwc.Webhooks[i]
		for _, rule := range wh.Rules {
			for _, res := range rule.Resources {
				hooks[res] = wh
			}
		}
	}

	// A replica as Longhorn's volume controller creates it (no disk yet),
	// and the same replica as its scheduler places it.
	unscheduled := testenv.Replica(ns, "pvc-a-r-0a1b2c3d", testenv.ReplicaFixture{Volume: "pvc-a", Size: 10 * gi})
	placed := func(disk string, size int64) *lhv1.Replica {
		return testenv.Replica(ns, "pvc-a-r-0a1b2c3d", testenv.ReplicaFixture{Volume: "pvc-a", Size: size,
			NodeID: "node-" + disk[len(disk)-1:], DiskName: "disk-" + disk[len(disk)-1:], DiskID: disk})
	}
	running := placed("uuid-0", 10*gi)
	running.Status.CurrentState = lhv1.InstanceStateRunning
	running.Status.Port = 10000
	reactivated := placed("uuid-0", 10*gi)
	reactivated.Spec.DesireState = lhv1.InstanceStateStopped
	cleared := placed("uuid-0", 10*gi)
	cleared.Spec.NodeID, cleared.Spec.DiskID, cleared.Spec.DiskPath = "", "", ""

	vol := func(size int64) *lhv1.Volume {
		return testenv.Volume(ns, "pvc-a", testenv.VolumeFixture{Size: size, Replicas: 3})
	}
	attached := vol(10 * gi)
	attached.Status.State = lhv1.VolumeStateAttached
	attached.Status.CurrentNodeID = "node-0"
	moreReplicas := vol(10 * gi)
	moreReplicas.Spec.NumberOfReplicas = 4

	image := func(realSize int64, disks ...string) *lhv1.BackingImage {
		bi := testenv.BackingImage(ns, "default-image-x7k2p", 10*gi, disks...)
		bi.Status.RealSize = realSize
		return bi
	}

	for _, w := range []write{
		{name: "a replica created without a disk", resource: "replicas", obj: unscheduled},
		{name: "a replica created on a disk", resource: "replicas", obj: placed("uuid-0", 10*gi)},
		{name: "a replica's diskID set", resource: "replicas", old: unscheduled, obj: placed("uuid-0", 10*gi)},
		{name: "a replica's diskID changed", resource: "replicas", old: placed("uuid-0", 10*gi), obj: placed("uuid-1", 10*gi)},
		{name: "a replica's diskID cleared", resource: "replicas", old: placed("uuid-0", 10*gi), obj: cleared},
		{name: "a replica's volumeSize grown on its disk", resource: "replicas", old: placed("uuid-0", 10*gi), obj: placed("uuid-0", 20*gi)},
		{name: "a replica's volumeSize shrunk on its disk", resource: "replicas", old: placed("uuid-0", 20*gi), obj: placed("uuid-0", 10*gi),
			deliberate: "CEL sends any volumeSize change on a disk; the gate admits a shrink at once (Longhorn never shrinks a volume)"},
		{name: "a replica's status written", resource: "replicas", old: placed("uuid-0", 10*gi), obj: running},
		{name: "a replica's other spec field written", resource: "replicas", old: placed("uuid-0", 10*gi), obj: reactivated},

		{name: "a volume created", resource: "volumes", obj: vol(10 * gi)},
		{name: "a volume grown", resource: "volumes", old: vol(10 * gi), obj: vol(20 * gi)},
		{name: "a volume shrunk", resource: "volumes", old: vol(20 * gi), obj: vol(10 * gi)},
		{name: "a volume's size unchanged", resource: "volumes", old: vol(10 * gi), obj: vol(10 * gi)},
		{name: "a volume's status written", resource: "volumes", old: vol(10 * gi), obj: attached},
		{name: "a volume's other spec field written", resource: "volumes", old: vol(10 * gi), obj: moreReplicas},

		{name: "a backing image created on a disk", resource: "backingimages", obj: image(0, "uuid-0")},
		// Longhorn's mutator sets diskFileSpecMap: {} on every create
		// (webhook/resources/backingimage/mutator.go): such a CREATE is
		// not sent.
		{name: "a backing image created without disks", resource: "backingimages", obj: image(0)},
		{name: "a backing image's first disk added", resource: "backingimages", old: image(0), obj: image(3*gi, "uuid-0")},
		{name: "a backing image gains a disk", resource: "backingimages", old: image(3*gi, "uuid-0"), obj: image(3*gi, "uuid-0", "uuid-1")},
		{name: "a backing image loses a disk", resource: "backingimages", old: image(3*gi, "uuid-0", "uuid-1"), obj: image(3*gi, "uuid-1")},
		{name: "a backing image's disks unchanged", resource: "backingimages", old: image(3*gi, "uuid-0"), obj: image(3*gi, "uuid-0")},
		{name: "a backing image's realSize written", resource: "backingimages", old: image(0, "uuid-0"), obj: image(3*gi, "uuid-0")},
	} {
		t.Run(w.name, func(t *testing.T) {
			wh := hooks[w.resource]
			if wh == nil {
				t.Fatalf("no webhook of diskschedule-gate names %s", w.resource)
			}
			sent := sends(t, compiler, vwc.Name, wh, w)
			takes := takesSpace(t, w)
			switch {
			case w.deliberate != "" && (!sent || takes):
				t.Errorf("named deliberate (%s), but the gate is sent it %v and Go says it takes space %v", w.deliberate, sent, takes)
			case w.deliberate == "" && sent != takes:
				t.Errorf("matchConditions send it to the gate: %v; Go says it takes space: %v", sent, takes)
			}
		})
	}
}

// sends reports whether kube-apiserver calls wh for w: its rules name the
// operation, and its matchConditions all hold.
func sends(t *testing.T, compiler celplugin.ConditionCompiler, configuration string, wh *admissionregistrationv1.ValidatingWebhook, w write) bool {
	t.Helper()
	op, oldU := admission.Create, runtime.Object(nil)
	if w.old != nil {
		op, oldU = admission.Update, asJSON(t, w.old)
	}
	named := false
	for _, rule := range wh.Rules {
		named = named || slices.Contains(rule.Operations, admissionregistrationv1.OperationType(op))
	}
	if !named {
		return false
	}
	obj := asJSON(t, w.obj)
	gvk := schema.GroupVersionKind{Group: "longhorn.io", Version: "v1beta2", Kind: obj.GetKind()}
	attr := admission.NewAttributesRecord(obj, oldU, gvk, obj.GetNamespace(), obj.GetName(),
		schema.GroupVersionResource{Group: "longhorn.io", Version: "v1beta2", Resource: w.resource}, "", op, nil, false,
		&user.DefaultInfo{Name: "system:serviceaccount:longhorn-system:longhorn-service-account"})
	versioned := &admission.VersionedAttributes{Attributes: attr, VersionedObject: obj, VersionedOldObject: oldU, VersionedKind: gvk}
	matcher := apiserverwebhook.NewValidatingWebhookAccessor("uid", configuration, wh).GetCompiledMatcher(compiler)
	result := matcher.Match(context.Background(), versioned, nil, nil)
	if result.Error != nil {
		t.Fatalf("evaluating the matchConditions of %s: %v", wh.Name, result.Error)
	}
	return result.Matches
}

// takesSpace is the Go predicate of w's kind.
func takesSpace(t *testing.T, w write) bool {
	t.Helper()
	switch obj := w.obj.(type) {
	case *lhv1.Replica:
		old, _ := w.old.(*lhv1.Replica)
		return replica.TakesSpace(old, obj)
	case *lhv1.Volume:
		old, _ := w.old.(*lhv1.Volume)
		return volume.TakesSpace(old, obj)
	case *lhv1.BackingImage:
		old, _ := w.old.(*lhv1.BackingImage)
		return backingimage.TakesSpace(old, obj)
	}
	t.Fatalf("no Go predicate for %T", w.obj)
	return false
}

// asJSON returns obj as the API server holds a custom resource: its JSON,
// read back without a Go type.
func asJSON(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatalf("reading %s back: %v", raw, err)
	}
	return u
}
