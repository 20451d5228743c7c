package v1beta2_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

const namespace = "longhorn-system"

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) {
		env = e
		if err := env.CreateNamespace(context.Background(), namespace); err != nil {
			panic(err)
		}
	}))
}

// TestSamplesAreValid creates every object in config/samples: DiskSchedule
// is the only kind the project owns, so it is the only sample.
func TestSamplesAreValid(t *testing.T) {
	ctx := context.Background()
	files, err := filepath.Glob(filepath.Join(env.RepoRoot, "config", "samples", "longhorn_v1beta2_*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(data, &obj.Object); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		obj.SetName("sample-" + obj.GetName())
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Errorf("%s: creating the sample %s: %v", filepath.Base(file), obj.GetKind(), err)
		}
		kinds[obj.GetKind()]++
	}
	if kinds["DiskSchedule"] != 1 || len(kinds) != 1 {
		t.Errorf("config/samples holds %v, want exactly one DiskSchedule", kinds)
	}
}

func diskSchedule(name string, mutate func(*dsv1.DiskScheduleSpec)) *dsv1.DiskSchedule {
	ds := &dsv1.DiskSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: dsv1.DiskScheduleSpec{
			Name: "disk-1", NodeID: "node-1",
			Replicas: map[string]dsv1.RequestedBytes{"r-1": 1 << 30},
		},
	}
	if mutate != nil {
		mutate(&ds.Spec)
	}
	return ds
}

// createThen creates a valid object, then applies an invalid change and
// returns the error of writing it (Update, or a status update).
func createThen(ctx context.Context, obj client.Object, change func(client.Object), status bool) error {
	if err := env.Client.Create(ctx, obj); err != nil {
		return fmt.Errorf("creating the valid object failed: %w", err)
	}
	change(obj)
	if status {
		return env.Client.Status().Update(ctx, obj)
	}
	return env.Client.Update(ctx, obj)
}

// TestInvalidObjectsAreRefused writes invalid DiskSchedules and checks the
// API server refuses each with the field path and message that say what is
// wrong.
func TestInvalidObjectsAreRefused(t *testing.T) {
	manyReplicas := map[string]dsv1.RequestedBytes{}
	for i := range dsv1.MaxReplicaEntries + 1 {
		manyReplicas[fmt.Sprintf("r-%d", i)] = 1
	}
	manyImages := map[string]dsv1.RequestedBytes{}
	for i := range 257 {
		manyImages[fmt.Sprintf("bi-%d", i)] = 1
	}
	cases := []struct {
		name  string
		write func(ctx context.Context) error
		path  string
		msg   string
	}{
		{"replica request of 0 bytes", create(diskSchedule("ds-zero", func(s *dsv1.DiskScheduleSpec) { s.Replicas["r-1"] = 0 })),
			"spec.replicas.r-1", "should be greater than or equal to 1"},
		{"negative replica request", create(diskSchedule("ds-negative", func(s *dsv1.DiskScheduleSpec) { s.Replicas["r-1"] = -5 })),
			"spec.replicas.r-1", "should be greater than or equal to 1"},
		{"backing-image request of 0 bytes", create(diskSchedule("ds-bi-zero", func(s *dsv1.DiskScheduleSpec) {
			s.BackingImages = map[string]dsv1.RequestedBytes{"image": 0}
		})), "spec.backingImages.image", "should be greater than or equal to 1"},
		{"reservation of 0 bytes", create(diskSchedule("ds-res-zero", func(s *dsv1.DiskScheduleSpec) {
			s.Reservations = map[string]dsv1.DiskScheduleReservation{"vol": {Size: 0, Pod: "default/p"}}
		})), "spec.reservations.vol.size", "should be greater than or equal to 1"},
		{"too many replica requests", create(diskSchedule("ds-many", func(s *dsv1.DiskScheduleSpec) { s.Replicas = manyReplicas })),
			"spec.replicas", fmt.Sprintf("must have at most %d items", dsv1.MaxReplicaEntries)},
		{"too many backing-image requests", create(diskSchedule("ds-many-bi", func(s *dsv1.DiskScheduleSpec) { s.BackingImages = manyImages })),
			"spec.backingImages", "must have at most 256 items"},
		{"reservation pod name too long", create(diskSchedule("ds-long-pod", func(s *dsv1.DiskScheduleSpec) {
			s.Reservations = map[string]dsv1.DiskScheduleReservation{"vol": {Size: 1, Pod: strings.Repeat("p", 318)}}
		})), "spec.reservations.vol.pod", "may not be more than 317 bytes"},
		{"missing disk name", create(diskSchedule("ds-noname", func(s *dsv1.DiskScheduleSpec) { s.Name = "" })),
			"spec.name", "should be at least 1 chars long"},
		{"missing node", create(diskSchedule("ds-nonode", func(s *dsv1.DiskScheduleSpec) { s.NodeID = "" })),
			"spec.nodeID", "should be at least 1 chars long"},
		{"nodeID changed", update(diskSchedule("ds-move", nil), func(o client.Object) { o.(*dsv1.DiskSchedule).Spec.NodeID = "node-2" }),
			"spec.nodeID", "nodeID is immutable"},
		{"disk name changed", update(diskSchedule("ds-rename", nil), func(o client.Object) { o.(*dsv1.DiskSchedule).Spec.Name = "disk-2" }),
			"spec.name", "name is immutable"},
		{"negative storageScheduled", updateStatus(diskSchedule("ds-status-negative", nil), func(o client.Object) {
			o.(*dsv1.DiskSchedule).Status.StorageScheduled = -1
		}), "status.storageScheduled", "should be greater than or equal to 0"},
		{"unknown decision state", updateStatus(diskSchedule("ds-status-state", nil), func(o client.Object) {
			o.(*dsv1.DiskSchedule).Status.Replicas = map[string]dsv1.RequestStatus{"r-1": {State: "granted", RequestedSize: 1, ScheduledSize: 1}}
		}), "status.replicas.r-1.state", `supported values: "scheduled", "rejected"`},
		{"unknown reservation state", updateStatus(diskSchedule("ds-status-res", nil), func(o client.Object) {
			o.(*dsv1.DiskSchedule).Status.Reservations = map[string]dsv1.ReservationStatus{"vol": {State: "held", RequestedSize: 1}}
		}), "status.reservations.vol.state", `supported values: "scheduled", "rejected", "expired", "fulfilled"`},
		{"negative scheduledSize", updateStatus(diskSchedule("ds-status-size", nil), func(o client.Object) {
			o.(*dsv1.DiskSchedule).Status.Replicas = map[string]dsv1.RequestStatus{"r-1": {State: dsv1.RequestStateScheduled, RequestedSize: 1, ScheduledSize: -1}}
		}), "status.replicas.r-1.scheduledSize", "should be greater than or equal to 0"},
	}
	cases = append(cases, boundsCases()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.write(context.Background())
			if err == nil {
				t.Fatalf("expected the API server to refuse the object, it accepted it")
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("expected an Invalid error, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.path+":") {
				t.Errorf("error does not name the field %q: %v", tc.path, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error does not say %q: %v", tc.msg, err)
			}
		})
	}
}

func create(obj client.Object) func(context.Context) error {
	return func(ctx context.Context) error { return env.Client.Create(ctx, obj) }
}

func update(obj client.Object, change func(client.Object)) func(context.Context) error {
	return func(ctx context.Context) error { return createThen(ctx, obj, change, false) }
}

func updateStatus(obj client.Object, change func(client.Object)) func(context.Context) error {
	return func(ctx context.Context) error { return createThen(ctx, obj, change, true) }
}

// near63 is a size near 2^63, far above MaxSize.
const near63 = math.MaxInt64 - 1000

// overMaxSize is the smallest size the schema refuses.
const overMaxSize = dsv1.MaxSize + 1

// atMost is the API server's message for a number over MaxSize.
var atMost = fmt.Sprintf("should be less than or equal to %d", dsv1.MaxSize)

// tooLongKey is a key one character longer than MaxKeyLength.
var tooLongKey = strings.Repeat("k", dsv1.MaxKeyLength+1)

// keyMessage is the CEL rule's message on a map with a key too long.
const keyMessage = "keys must be at most 253 characters long: they are Kubernetes object names"

// bigMap returns a map of n keys, each with the value v.
func bigMap[V any](n int, v V) map[string]V {
	m := make(map[string]V, n)
	for i := range n {
		m[fmt.Sprintf("k-%05d", i)] = v
	}
	return m
}

// boundsCases are the invalid objects that test the bounds of every input:
// sizes near 2^63, maps of 10,000 keys, keys longer than an object name.
func boundsCases() []struct {
	name  string
	write func(ctx context.Context) error
	path  string
	msg   string
} {
	spec := func(name string, mutate func(*dsv1.DiskScheduleSpec)) func(context.Context) error {
		return create(diskSchedule(name, mutate))
	}
	status := func(name string, mutate func(*dsv1.DiskScheduleStatus)) func(context.Context) error {
		return updateStatus(diskSchedule(name, nil), func(o client.Object) { mutate(&o.(*dsv1.DiskSchedule).Status) })
	}
	reservation := func(size int64) dsv1.DiskScheduleReservation {
		return dsv1.DiskScheduleReservation{Size: size, Pod: "default/p"}
	}
	decision := func(size int64) dsv1.RequestStatus {
		return dsv1.RequestStatus{State: dsv1.RequestStateScheduled, RequestedSize: size, ScheduledSize: size}
	}
	return []struct {
		name  string
		write func(ctx context.Context) error
		path  string
		msg   string
	}{
		{"replica request near 2^63", spec("ds-huge", func(s *dsv1.DiskScheduleSpec) { s.Replicas["r-1"] = near63 }),
			"spec.replicas.r-1", atMost},
		{"replica request one byte over MaxSize", spec("ds-over", func(s *dsv1.DiskScheduleSpec) { s.Replicas["r-1"] = overMaxSize }),
			"spec.replicas.r-1", atMost},
		{"backing-image request near 2^63", spec("ds-bi-huge", func(s *dsv1.DiskScheduleSpec) {
			s.BackingImages = map[string]dsv1.RequestedBytes{"image": near63}
		}), "spec.backingImages.image", atMost},
		{"reservation near 2^63", spec("ds-res-huge", func(s *dsv1.DiskScheduleSpec) {
			s.Reservations = map[string]dsv1.DiskScheduleReservation{"vol": reservation(near63)}
		}), "spec.reservations.vol.size", atMost},
		{"scheduledSize near 2^63", status("ds-status-huge", func(st *dsv1.DiskScheduleStatus) {
			st.Replicas = map[string]dsv1.RequestStatus{"r-1": {State: dsv1.RequestStateScheduled, RequestedSize: 1, ScheduledSize: near63}}
		}), "status.replicas.r-1.scheduledSize", atMost},
		{"requestedSize near 2^63", status("ds-status-req-huge", func(st *dsv1.DiskScheduleStatus) {
			st.BackingImages = map[string]dsv1.RequestStatus{"image": {State: dsv1.RequestStateRejected, RequestedSize: near63}}
		}), "status.backingImages.image.requestedSize", atMost},
		{"reservation decision near 2^63", status("ds-status-res-huge", func(st *dsv1.DiskScheduleStatus) {
			st.Reservations = map[string]dsv1.ReservationStatus{"vol": {State: dsv1.ReservationStateScheduled, RequestedSize: near63, ScheduledSize: near63}}
		}), "status.reservations.vol.requestedSize", atMost},
		{"10,000 replica requests", spec("ds-10k", func(s *dsv1.DiskScheduleSpec) { s.Replicas = bigMap[dsv1.RequestedBytes](10000, 1) }),
			"spec.replicas", fmt.Sprintf("must have at most %d items", dsv1.MaxReplicaEntries)},
		{"10,000 reservations", spec("ds-10k-res", func(s *dsv1.DiskScheduleSpec) { s.Reservations = bigMap(10000, reservation(1)) }),
			"spec.reservations", "must have at most 1024 items"},
		{"10,000 replica versions", spec("ds-10k-versions", func(s *dsv1.DiskScheduleSpec) { s.ReplicaVersions = bigMap(10000, "1") }),
			"spec.replicaVersions", fmt.Sprintf("must have at most %d items", dsv1.MaxReplicaEntries)},
		{"10,000 replica decisions", status("ds-status-10k", func(st *dsv1.DiskScheduleStatus) { st.Replicas = bigMap(10000, decision(1)) }),
			"status.replicas", fmt.Sprintf("must have at most %d items", dsv1.MaxReplicaEntries)},
		{"replica name too long", spec("ds-long-replica", func(s *dsv1.DiskScheduleSpec) { s.Replicas[tooLongKey] = 1 }),
			"spec.replicas", keyMessage},
		{"backing-image name too long", spec("ds-long-bi", func(s *dsv1.DiskScheduleSpec) {
			s.BackingImages = map[string]dsv1.RequestedBytes{tooLongKey: 1}
		}), "spec.backingImages", keyMessage},
		{"volume name too long", spec("ds-long-vol", func(s *dsv1.DiskScheduleSpec) {
			s.Reservations = map[string]dsv1.DiskScheduleReservation{tooLongKey: reservation(1)}
		}), "spec.reservations", keyMessage},
		{"replica version's name too long", spec("ds-long-version", func(s *dsv1.DiskScheduleSpec) {
			s.ReplicaVersions = map[string]string{tooLongKey: "1"}
		}), "spec.replicaVersions", keyMessage},
		{"replica decision's name too long", status("ds-status-long", func(st *dsv1.DiskScheduleStatus) {
			st.Replicas = map[string]dsv1.RequestStatus{tooLongKey: decision(1)}
		}), "status.replicas", keyMessage},
		{"backing-image decision's name too long", status("ds-status-long-bi", func(st *dsv1.DiskScheduleStatus) {
			st.BackingImages = map[string]dsv1.RequestStatus{tooLongKey: decision(1)}
		}), "status.backingImages", keyMessage},
		{"reservation decision's name too long", status("ds-status-long-res", func(st *dsv1.DiskScheduleStatus) {
			st.Reservations = map[string]dsv1.ReservationStatus{tooLongKey: {State: dsv1.ReservationStateExpired, RequestedSize: 1}}
		}), "status.reservations", keyMessage},
	}
}

// TestBoundsAcceptValidObjects writes objects at every bound: the API
// server accepts them, so the bounds refuse nothing a real ledger holds.
func TestBoundsAcceptValidObjects(t *testing.T) {
	ctx := context.Background()
	longest := strings.Repeat("k", dsv1.MaxKeyLength)
	ds := diskSchedule("ds-at-bounds", func(s *dsv1.DiskScheduleSpec) {
		s.Replicas = bigMap[dsv1.RequestedBytes](dsv1.MaxReplicaEntries-1, dsv1.MaxSize)
		s.Replicas[longest] = dsv1.MaxSize
		s.BackingImages = bigMap[dsv1.RequestedBytes](256, dsv1.MaxSize)
		s.Reservations = bigMap(1024, dsv1.DiskScheduleReservation{Size: dsv1.MaxSize, Pod: "default/p"})
		s.ReplicaVersions = map[string]string{longest: "1"}
	})
	if err := env.Client.Create(ctx, ds); err != nil {
		t.Fatalf("creating a DiskSchedule at every bound of its spec: %v", err)
	}
	ds.Status = dsv1.DiskScheduleStatus{
		StorageScheduled: math.MaxInt64, StorageLimit: math.MaxInt64,
		Replicas: map[string]dsv1.RequestStatus{longest: {State: dsv1.RequestStateScheduled, RequestedSize: dsv1.MaxSize, ScheduledSize: dsv1.MaxSize}},
		Reservations: map[string]dsv1.ReservationStatus{longest: {
			State: dsv1.ReservationStateScheduled, RequestedSize: dsv1.MaxSize, ScheduledSize: dsv1.MaxSize, Pod: "default/p"}},
	}
	if err := env.Client.Status().Update(ctx, ds); err != nil {
		t.Fatalf("writing a status at every bound: %v", err)
	}
}
