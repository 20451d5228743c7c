package diskschedule_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/controller/config"
	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// TestReservationTimeoutFromConfigMap checks that the ledger takes the
// reservation timeout from the ConfigMap diskschedule-config without a
// restart, and that an invalid value keeps the one in effect and records a
// Warning Event on the ConfigMap.
func TestReservationTimeoutFromConfigMap(t *testing.T) {
	ctx := t.Context()
	l := newLedger(t, ctx, 100*gi)
	l.setReservationTimeout(120)

	setConfig(t, ctx, l.ns, map[string]string{settings.SchedulerExtenderNodeReservationTimeout: "two minutes"})
	waitInvalidSettingEvent(t, ctx, l.ns)
	written := l.clock.Now()
	ds := l.write(func(s *dsv1.DiskScheduleSpec) {
		s.Reservations = map[string]dsv1.DiskScheduleReservation{"vol-1": {Size: gi, Pod: l.ns + "/pod-1"}}
	})
	res := ds.Status.Reservations["vol-1"]
	if res.State != dsv1.ReservationStateScheduled || res.ExpiresAt == nil {
		t.Fatalf("reservation vol-1: %+v, want scheduled with expiresAt", res)
	}
	if d := res.ExpiresAt.Sub(written); d != 120*time.Second {
		t.Errorf("the reservation expires %v after it was decided, want 120s (the value kept in effect)", d)
	}
}

// waitInvalidSettingEvent waits for the Warning Event on the ConfigMap.
func waitInvalidSettingEvent(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	testenv.Eventually(t, ctx, ledgerTimeout, fmt.Sprintf("a Warning %s Event on the ConfigMap", config.ReasonInvalidSetting), func(ctx context.Context) (bool, string, error) {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		for _, ev := range list.Items {
			if ev.Type == corev1.EventTypeWarning && ev.Reason == config.ReasonInvalidSetting &&
				ev.Regarding.Kind == "ConfigMap" && ev.Regarding.Name == settings.ConfigMapName {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items)), nil
	})
}
