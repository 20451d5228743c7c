package testenv

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// Unsettled describes, sorted, the DiskSchedules of namespace whose
// storageScheduled differs from what Longhorn persisted on their disk,
// replicas and backing-image copies (ledger.PersistedByDisk), or that have
// pending requests; "" when every ledger has settled on what is persisted:
// nothing leaked, every request decided.
func Unsettled(ctx context.Context, c client.Reader, namespace string) (string, error) {
	list := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return "", fmt.Errorf("listing DiskSchedules: %w", err)
	}
	persisted, err := PersistedByDisk(ctx, c, namespace, list.Items)
	if err != nil {
		return "", err
	}
	var off []string
	for i := range list.Items {
		ds := &list.Items[i]
		total := persisted[ds.Name].Total()
		if ds.Status.StorageScheduled != total || ledger.PendingCount(ds) != 0 {
			off = append(off, fmt.Sprintf("%s/%s: ledger %s (%d pending), persisted %s", ds.Spec.NodeID, ds.Spec.Name,
				ledger.Bytes(ds.Status.StorageScheduled), ledger.PendingCount(ds), ledger.Bytes(total)))
		}
	}
	sort.Strings(off)
	return strings.Join(off, "; "), nil
}

// PersistedByDisk reads the Replicas and BackingImages of namespace and
// returns what Longhorn persisted on each disk (ledger.PersistedByDisk), a
// shared data directory counted under the replica that has an entry in
// ledgers, as the mirror counts it.
func PersistedByDisk(ctx context.Context, c client.Reader, namespace string, ledgers []dsv1.DiskSchedule) (map[string]ledger.Persisted, error) {
	replicas := &lhv1.ReplicaList{}
	if err := c.List(ctx, replicas, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing replicas: %w", err)
	}
	images := &lhv1.BackingImageList{}
	if err := c.List(ctx, images, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing backing images: %w", err)
	}
	entries := map[string]map[string]dsv1.RequestedBytes{}
	for i := range ledgers {
		entries[ledgers[i].Name] = ledgers[i].Spec.Replicas
	}
	return ledger.PersistedByDisk(replicas.Items, images.Items, func(r *lhv1.Replica) bool {
		_, ok := entries[r.Spec.DiskID][r.Name]
		return ok
	}), nil
}

// QuietBenchmarks discards the in-process controllers' logs when the test
// binary runs benchmarks (-test.bench set), to keep the figures readable:
// the project's and Longhorn's own (its datastore and scheduler log with
// logrus). Call it from TestMain after flag.Parse.
func QuietBenchmarks() {
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		ctrllog.SetLogger(logr.Discard())
		klog.SetLogger(logr.Discard())
		logrus.SetOutput(io.Discard)
	}
}
