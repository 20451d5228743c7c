package diskschedule_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/controller/config"
	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) { env = e }))
}

// ledgerTimeout bounds every wait for a ledger or for what the manager records.
const ledgerTimeout = 20 * time.Second

// newNamespace creates a namespace named after the test, so each test owns its objects.
func newNamespace(t *testing.T) string { return env.NewNamespace(t) }

// setConfig creates or updates the ConfigMap diskschedule-config of
// namespace with data, as an operator would.
func setConfig(t *testing.T, ctx context.Context, namespace string, data map[string]string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: settings.ConfigMapName}, cm)
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: settings.ConfigMapName}, Data: data}
			return env.Client.Create(ctx, cm)
		}
		if err != nil {
			return err
		}
		cm.Data = data
		return env.Client.Update(ctx, cm)
	})
	if err != nil {
		t.Fatalf("writing ConfigMap %s: %v", settings.ConfigMapName, err)
	}
}

// waitSettingsApplied waits until the manager records that want is in effect.
func waitSettingsApplied(t *testing.T, ctx context.Context, namespace string, want config.Extender) {
	t.Helper()
	note := "Settings in effect: " + want.String()
	testenv.Eventually(t, ctx, ledgerTimeout, fmt.Sprintf("the event %q", note), func(ctx context.Context) (bool, string, error) {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return false, "", err
		}
		var seen []string
		for _, ev := range list.Items {
			if ev.Reason == config.ReasonSettingsApplied {
				if ev.Note == note {
					return true, "", nil
				}
				seen = append(seen, ev.Note)
			}
		}
		return false, fmt.Sprintf("%q", seen), nil
	})
}
