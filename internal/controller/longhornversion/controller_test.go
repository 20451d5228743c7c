package longhornversion_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/longhorn/diskschedule/internal/controller/longhornversion"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) { env = e }))
}

// The manager follows Longhorn's Setting current-longhorn-version: the
// metric names the release and whether it is tested; a change records an
// Event on the Setting, and a release outside the tested ones a Warning
// that says so.
func TestFollowsLonghornsVersion(t *testing.T) {
	ctx := t.Context()
	ns := env.NewNamespace(t)
	setting := &lhv1.Setting{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: longhornversion.SettingName}, Value: "v1.11.1"}
	if err := env.Client.Create(ctx, setting); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := metrics.NewLonghorn(reg)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := longhornversion.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder("diskschedule-longhorn-version"), ns, m)
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	running, err := env.RunManager(mgr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = running.Stop() })

	exported := func(version, tested string) testenv.Check {
		return func(context.Context) (bool, string, error) {
			got := testutil.ToFloat64(m.Version.WithLabelValues(version, tested))
			return got == 1 && testutil.CollectAndCount(m.Version) == 1,
				fmt.Sprintf("%d series, {version=%s,tested=%s} = %v", testutil.CollectAndCount(m.Version), version, tested, got), nil
		}
	}
	testenv.Eventually(t, ctx, 10*time.Second, "v1.11.1 exported as tested", exported("v1.11.1", "true"))
	if v, err := longhornversion.Read(ctx, env.Client, ns); err != nil || v != "v1.11.1" {
		t.Errorf("Read: %q, %v; want v1.11.1", v, err)
	}

	// Longhorn is rolled back to a release the project is not tested against.
	setting.Value = "v1.9.2"
	if err := env.Client.Update(ctx, setting); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, ctx, 10*time.Second, "v1.9.2 exported as untested", exported("v1.9.2", "false"))
	testenv.Eventually(t, ctx, 10*time.Second, "an Event for the change and a Warning naming the tested releases", func(ctx context.Context) (bool, string, error) {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		var changed, untested bool
		var seen []string
		for _, ev := range list.Items {
			if ev.Regarding.Name != longhornversion.SettingName {
				continue
			}
			seen = append(seen, ev.Reason+": "+ev.Note)
			changed = changed || ev.Reason == longhornversion.ReasonLonghornVersionChanged && strings.Contains(ev.Note, "from v1.11.1 to v1.9.2")
			untested = untested || ev.Reason == longhornversion.ReasonLonghornVersionUntested && ev.Type == "Warning" &&
				strings.Contains(ev.Note, "Longhorn v1.9.2 is outside the releases diskschedule is tested against (v1.10.x, v1.11.x and v1.12.x)")
		}
		return changed && untested, strings.Join(seen, "; "), nil
	})
}
