package v1beta2_test

import (
	"context"
	"fmt"
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
