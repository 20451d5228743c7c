package config

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/settings"
)

func TestNext(t *testing.T) {
	prev := Extender{Enabled: false, PodSchedulingTimeout: 7 * time.Second, NodeReservationTimeout: 9 * time.Second}
	cm := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: settings.ConfigMapName}, Data: data}
	}
	for _, tc := range []struct {
		name    string
		cm      *corev1.ConfigMap
		want    Extender
		invalid []string
	}{
		{"no ConfigMap: defaults", nil, DefaultExtender(), nil},
		{"empty ConfigMap: defaults", cm(nil), DefaultExtender(), nil},
		{"valid values", cm(map[string]string{
			settings.SchedulerExtenderEnabled:                "false",
			settings.SchedulerExtenderPodSchedulingTimeout:   "0",
			settings.SchedulerExtenderNodeReservationTimeout: "60",
		}), Extender{Enabled: false, PodSchedulingTimeout: 0, NodeReservationTimeout: time.Minute}, nil},
		{"invalid values keep the previous ones", cm(map[string]string{
			settings.SchedulerExtenderEnabled:                "yes",
			settings.SchedulerExtenderPodSchedulingTimeout:   "-1",
			settings.SchedulerExtenderNodeReservationTimeout: "5s",
		}), prev, []string{settings.SchedulerExtenderEnabled, settings.SchedulerExtenderPodSchedulingTimeout,
			settings.SchedulerExtenderNodeReservationTimeout}},
		{"one invalid, one valid, one missing", cm(map[string]string{
			settings.SchedulerExtenderEnabled:                "true",
			settings.SchedulerExtenderNodeReservationTimeout: "abc",
		}), Extender{Enabled: true, PodSchedulingTimeout: 5 * time.Second, NodeReservationTimeout: 9 * time.Second},
			[]string{settings.SchedulerExtenderNodeReservationTimeout}},
		{"Longhorn's settings in the ConfigMap are not the extender's", cm(map[string]string{
			settings.StorageOverProvisioningPercentage: "abc",
		}), DefaultExtender(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, invalid := Next(prev, tc.cm)
			if got != tc.want {
				t.Errorf("settings %s, want %s", got, tc.want)
			}
			if len(invalid) != len(tc.invalid) {
				t.Errorf("invalid %v, want keys %v", invalid, tc.invalid)
			}
			for _, key := range tc.invalid {
				if invalid[key] == nil {
					t.Errorf("%s not reported invalid: %v", key, invalid)
				}
			}
		})
	}
}

func TestStoreSignalsReservationTimeoutChanges(t *testing.T) {
	s := NewStore()
	cause := &corev1.ConfigMap{}
	next := s.Get()
	next.Enabled = !next.Enabled
	if !s.set(next, cause) {
		t.Fatal("a change was not reported")
	}
	select {
	case <-s.ReservationTimeoutChanges():
		t.Fatal("a change of another setting signalled the reservation timeout")
	default:
	}
	next.NodeReservationTimeout = time.Minute
	s.set(next, cause)
	next.NodeReservationTimeout = 2 * time.Minute
	s.set(next, cause) // coalesced with the first
	select {
	case ev := <-s.ReservationTimeoutChanges():
		if ev.Object != cause {
			t.Errorf("event object %v, want the ConfigMap", ev.Object)
		}
	default:
		t.Fatal("the reservation timeout change was not signalled")
	}
	if s.NodeReservationTimeout() != 2*time.Minute {
		t.Errorf("timeout %v, want 2m", s.NodeReservationTimeout())
	}
	if s.set(next, cause) {
		t.Error("setting the same values reported a change")
	}
}

// TestReconcileExportsExtenderEnabled checks that the settings in effect,
// not the ConfigMap's raw values, set longhorn_scheduler_extender_enabled:
// an invalid value keeps the gauge at the value in effect, and records a
// Warning Event, which a valid one does not.
func TestReconcileExportsExtenderEnabled(t *testing.T) {
	const ns = "longhorn-system"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: settings.ConfigMapName}}
	c := fake.NewClientBuilder().WithObjects(cm).Build()
	m := metrics.NewConfig(prometheus.NewRegistry())
	recorder := events.NewFakeRecorder(8)
	r := NewReconciler(c, recorder, NewStore(), ns, m)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cm)}
	ctx := context.Background()
	for _, step := range []struct {
		enabled string
		want    float64
		warning bool
	}{
		{"", 1, false}, // the key is absent: the default, enabled
		{"false", 0, false},
		{"yes", 0, true}, // invalid: the value in effect stays
		{"true", 1, false},
	} {
		if step.enabled != "" {
			cm.Data = map[string]string{settings.SchedulerExtenderEnabled: step.enabled}
			if err := c.Update(ctx, cm); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		if got := testutil.ToFloat64(m.ExtenderEnabled.WithLabelValues()); got != step.want {
			t.Errorf("%s=%q: longhorn_scheduler_extender_enabled = %v, want %v", settings.SchedulerExtenderEnabled, step.enabled, got, step.want)
		}
		warned := false
		for len(recorder.Events) > 0 {
			warned = warned || strings.HasPrefix(<-recorder.Events, corev1.EventTypeWarning+" "+ReasonInvalidSetting+" ")
		}
		if warned != step.warning {
			t.Errorf("%s=%q: Warning %s Event recorded %v, want %v", settings.SchedulerExtenderEnabled, step.enabled, ReasonInvalidSetting, warned, step.warning)
		}
	}
}
