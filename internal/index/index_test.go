package index

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// recorder is a FieldIndexer that records the kind and field of each index.
type recorder []string

func (r *recorder) IndexField(_ context.Context, obj client.Object, field string, _ client.IndexerFunc) error {
	*r = append(*r, fmt.Sprintf("%T %s", obj, field))
	return nil
}

// Register indexes every kind; RegisterFor the kinds it is given alone, so
// a cache follows no kind it was not meant to read.
func TestRegisterFor(t *testing.T) {
	var all, replicas recorder
	if err := Register(context.Background(), &all); err != nil {
		t.Fatal(err)
	}
	if err := RegisterFor(context.Background(), &replicas, &lhv1.Replica{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"*v1beta2.Replica " + ReplicaByDisk, "*v1beta2.Replica " + ReplicaByVolume}
	if !slices.Equal(replicas, want) {
		t.Errorf("RegisterFor(Replica) indexed %v, want %v", replicas, want)
	}
	for _, kind := range []client.Object{&lhv1.Replica{}, &lhv1.BackingImage{}, &dsv1.DiskSchedule{}} {
		if !slices.ContainsFunc(all, func(s string) bool { return strings.HasPrefix(s, fmt.Sprintf("%T ", kind)) }) {
			t.Errorf("Register indexed %v, nothing of %T", all, kind)
		}
	}
}
