package v1beta2_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/testenv"
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

// TestSamplesAreValid creates every object in config/samples: one valid
// object of each kind.
func TestSamplesAreValid(t *testing.T) {
	ctx := context.Background()
	files, err := filepath.Glob(filepath.Join(env.RepoRoot, "config", "samples", "longhorn_v1beta2_*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
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
		if obj.GetKind() == "Setting" {
			obj.SetName(obj.GetName()[len("sample-"):])
		}
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Errorf("%s: creating the sample %s: %v", filepath.Base(file), obj.GetKind(), err)
		}
		kinds[obj.GetKind()] = true
	}
	for _, kind := range []string{"DiskSchedule", "Node", "Volume", "Replica", "BackingImage", "Setting"} {
		if !kinds[kind] {
			t.Errorf("config/samples has no %s", kind)
		}
	}
}

func meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace}
}

func diskSchedule(name string, mutate func(*longhornv1.DiskScheduleSpec)) *longhornv1.DiskSchedule {
	ds := &longhornv1.DiskSchedule{
		ObjectMeta: meta(name),
		Spec: longhornv1.DiskScheduleSpec{
			Name: "disk-1", NodeID: "node-1",
			Replicas: map[string]longhornv1.RequestedBytes{"r-1": 1 << 30},
		},
	}
	if mutate != nil {
		mutate(&ds.Spec)
	}
	return ds
}

func volume(name string, mutate func(*longhornv1.VolumeSpec)) *longhornv1.Volume {
	v := &longhornv1.Volume{
		ObjectMeta: meta(name),
		Spec:       longhornv1.VolumeSpec{Size: resource.MustParse("1Gi"), NumberOfReplicas: 3},
	}
	mutate(&v.Spec)
	return v
}

func node(name string, mutate func(*longhornv1.DiskSpec)) *longhornv1.Node {
	disk := longhornv1.DiskSpec{Path: "/var/lib/longhorn", DiskType: longhornv1.DiskTypeFilesystem, AllowScheduling: true}
	mutate(&disk)
	return &longhornv1.Node{ObjectMeta: meta(name), Spec: longhornv1.NodeSpec{Disks: map[string]longhornv1.DiskSpec{"disk-1": disk}}}
}

func setting(name, value string) *longhornv1.Setting {
	return &longhornv1.Setting{ObjectMeta: meta(name), Value: value}
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

// TestInvalidObjectsAreRefused writes invalid objects and checks the API
// server refuses each with the field path and message that say what is wrong.
func TestInvalidObjectsAreRefused(t *testing.T) {
	manyReplicas := map[string]longhornv1.RequestedBytes{}
	for i := range 1025 {
		manyReplicas[fmt.Sprintf("r-%d", i)] = 1
	}
	cases := []struct {
		name  string
		write func(ctx context.Context) error
		path  string
		msg   string
	}{
		{"replica request of 0 bytes", create(diskSchedule("ds-zero", func(s *longhornv1.DiskScheduleSpec) { s.Replicas["r-1"] = 0 })),
			"spec.replicas.r-1", "should be greater than or equal to 1"},
		{"negative replica request", create(diskSchedule("ds-negative", func(s *longhornv1.DiskScheduleSpec) { s.Replicas["r-1"] = -5 })),
			"spec.replicas.r-1", "should be greater than or equal to 1"},
		{"backing-image request of 0 bytes", create(diskSchedule("ds-bi-zero", func(s *longhornv1.DiskScheduleSpec) {
			s.BackingImages = map[string]longhornv1.RequestedBytes{"image": 0}
		})), "spec.backingImages.image", "should be greater than or equal to 1"},
		{"reservation of 0 bytes", create(diskSchedule("ds-res-zero", func(s *longhornv1.DiskScheduleSpec) {
			s.Reservations = map[string]longhornv1.DiskScheduleReservation{"vol": {Size: 0, Pod: "default/p"}}
		})), "spec.reservations.vol.size", "should be greater than or equal to 1"},
		{"too many replica requests", create(diskSchedule("ds-many", func(s *longhornv1.DiskScheduleSpec) { s.Replicas = manyReplicas })),
			"spec.replicas", "must have at most 1024 items"},
		{"missing disk name", create(diskSchedule("ds-noname", func(s *longhornv1.DiskScheduleSpec) { s.Name = "" })),
			"spec.name", "should be at least 1 chars long"},
		{"missing node", create(diskSchedule("ds-nonode", func(s *longhornv1.DiskScheduleSpec) { s.NodeID = "" })),
			"spec.nodeID", "should be at least 1 chars long"},
		{"nodeID changed", update(diskSchedule("ds-move", nil), func(o client.Object) { o.(*longhornv1.DiskSchedule).Spec.NodeID = "node-2" }),
			"spec.nodeID", "nodeID is immutable"},
		{"disk name changed", update(diskSchedule("ds-rename", nil), func(o client.Object) { o.(*longhornv1.DiskSchedule).Spec.Name = "disk-2" }),
			"spec.name", "name is immutable"},
		{"negative storageScheduled", updateStatus(diskSchedule("ds-status-negative", nil), func(o client.Object) {
			o.(*longhornv1.DiskSchedule).Status.StorageScheduled = -1
		}), "status.storageScheduled", "should be greater than or equal to 0"},
		{"unknown decision state", updateStatus(diskSchedule("ds-status-state", nil), func(o client.Object) {
			o.(*longhornv1.DiskSchedule).Status.Replicas = map[string]longhornv1.RequestStatus{"r-1": {State: "granted", RequestedSize: 1, ScheduledSize: 1}}
		}), "status.replicas.r-1.state", `supported values: "scheduled", "rejected"`},
		{"unknown disk type", create(node("node-tape", func(d *longhornv1.DiskSpec) { d.DiskType = "tape" })),
			"spec.disks.disk-1.diskType", `supported values: "filesystem", "block"`},
		{"negative storageReserved", create(node("node-reserved", func(d *longhornv1.DiskSpec) { d.StorageReserved = -1 })),
			"spec.disks.disk-1.storageReserved", "should be greater than or equal to 0"},
		{"disk without path", create(node("node-nopath", func(d *longhornv1.DiskSpec) { d.Path = "" })),
			"spec.disks.disk-1.path", "should be at least 1 chars long"},
		{"zero replicas", create(volume("vol-zero", func(s *longhornv1.VolumeSpec) { s.NumberOfReplicas = -1 })),
			"spec.numberOfReplicas", "should be greater than or equal to 1"},
		{"21 replicas", create(volume("vol-21", func(s *longhornv1.VolumeSpec) { s.NumberOfReplicas = 21 })),
			"spec.numberOfReplicas", "should be less than or equal to 20"},
		{"unknown data locality", create(volume("vol-locality", func(s *longhornv1.VolumeSpec) { s.DataLocality = "always" })),
			"spec.dataLocality", `supported values: "disabled", "best-effort", "strict-local"`},
		{"unknown node anti-affinity mode", create(volume("vol-aa", func(s *longhornv1.VolumeSpec) { s.ReplicaSoftAntiAffinity = "maybe" })),
			"spec.replicaSoftAntiAffinity", `supported values: "ignored", "enabled", "disabled"`},
		{"unknown zone anti-affinity mode", create(volume("vol-zaa", func(s *longhornv1.VolumeSpec) { s.ReplicaZoneSoftAntiAffinity = "yes" })),
			"spec.replicaZoneSoftAntiAffinity", `supported values: "ignored", "enabled", "disabled"`},
		{"unknown disk anti-affinity mode", create(volume("vol-daa", func(s *longhornv1.VolumeSpec) { s.ReplicaDiskSoftAntiAffinity = "no" })),
			"spec.replicaDiskSoftAntiAffinity", `supported values: "ignored", "enabled", "disabled"`},
		{"strict-local with 3 replicas", create(volume("vol-strict", func(s *longhornv1.VolumeSpec) { s.DataLocality = longhornv1.DataLocalityStrictLocal })),
			"spec", "a strict-local volume has exactly 1 replica"},
		{"zero volume size", create(volume("vol-size", func(s *longhornv1.VolumeSpec) { s.Size = resource.MustParse("0") })),
			"spec.size", "size must be a quantity greater than 0"},
		{"replica of 0 bytes", create(&longhornv1.Replica{ObjectMeta: meta("r-zero"), Spec: longhornv1.ReplicaSpec{VolumeName: "vol", VolumeSize: 0}}),
			"spec.volumeSize", "should be greater than or equal to 1"},
		{"replica without volume", create(&longhornv1.Replica{ObjectMeta: meta("r-novol"), Spec: longhornv1.ReplicaSpec{VolumeSize: 1}}),
			"spec.volumeName", "should be at least 1 chars long"},
		{"backing image with 0 copies", create(&longhornv1.BackingImage{ObjectMeta: meta("bi-zero"), Spec: longhornv1.BackingImageSpec{MinNumberOfCopies: -1}}),
			"spec.minNumberOfCopies", "should be greater than or equal to 1"},
		{"non-numeric over-provisioning", create(setting(longhornv1.SettingStorageOverProvisioningPercentage+"-x", "abc")), "", ""},
		{"over-provisioning not an integer", updateSetting(longhornv1.SettingStorageOverProvisioningPercentage, "abc"),
			"value", "value must be a non-negative integer"},
		{"minimal available over 100", updateSetting(longhornv1.SettingStorageMinimalAvailablePercentage, "101"),
			"value", "value must be an integer percentage from 0 to 100"},
		{"anti-affinity not a boolean", updateSetting(longhornv1.SettingReplicaSoftAntiAffinity, "yes"),
			"value", "value must be true or false"},
		{"negative reservation timeout", updateSetting(longhornv1.SettingSchedulerExtenderNodeReservationTimeout, "-1"),
			"value", "value must be a non-negative integer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.write(context.Background())
			if tc.path == "" && tc.msg == "" {
				// An unknown setting name is not a scheduling setting: accepted.
				if err != nil {
					t.Fatalf("expected an unknown setting to be accepted, got %v", err)
				}
				return
			}
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

// updateSetting creates a setting with a valid value, then tries to set value.
func updateSetting(name, value string) func(context.Context) error {
	return func(ctx context.Context) error {
		s := setting(name+"-", "")
		s.Name = name
		valid := "1"
		if strings.Contains(name, "anti-affinity") {
			valid = "true"
		}
		s.Value = valid
		if err := env.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the valid setting failed: %w", err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
			return err
		}
		s.Value = value
		return env.Client.Update(ctx, s)
	}
}
