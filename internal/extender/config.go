package extender

import (
	"context"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/clusterview"
	"github.com/longhorn/diskschedule/internal/settings"
)

// liveSettings reads the scheduling settings on every call, through the
// manager's cache: Longhorn's Setting objects and the extender's keys in the
// ConfigMap settings.ConfigMapName, so a change applies without a restart.
// An invalid value of one of the extender's keys keeps the value in effect
// before it (the default until a valid one was read).
type liveSettings struct {
	reader    client.Reader
	namespace string

	mu sync.Mutex
	// last are the settings the previous call returned.
	last settings.Scheduling
	// reported holds, by key, the error of an invalid value already logged,
	// so each bad value is logged once.
	reported map[string]string
}

// newLiveSettings returns settings read through r in namespace.
func newLiveSettings(r client.Reader, namespace string) *liveSettings {
	return &liveSettings{reader: r, namespace: namespace, last: settings.Default(), reported: map[string]string{}}
}

// get returns the settings in effect now.
func (l *liveSettings) get(ctx context.Context) (settings.Scheduling, error) {
	// The Settings are only read: skipping the cache's deep copy keeps the
	// filter's serial cost low.
	s, invalid, err := clusterview.Settings(ctx, l.reader, l.namespace, client.UnsafeDisableDeepCopy)
	if err != nil {
		return settings.Scheduling{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, why := range invalid {
		if settings.IsLonghorn(name) {
			continue // Longhorn validates its own settings; clusterview keeps the default
		}
		keepPrevious(&s, l.last, name)
		if l.reported[name] != why.Error() {
			l.reported[name] = why.Error()
			ctrl.LoggerFrom(ctx).Info("Ignoring an invalid value in the extender's ConfigMap; the previous value stays in effect",
				"configMap", client.ObjectKey{Namespace: l.namespace, Name: settings.ConfigMapName}, "key", name, "error", why.Error())
		}
	}
	for name := range l.reported {
		if _, still := invalid[name]; !still {
			delete(l.reported, name)
		}
	}
	l.last = s
	return s, nil
}

// keepPrevious sets the extender's setting name in s back to its value in prev.
func keepPrevious(s *settings.Scheduling, prev settings.Scheduling, name string) {
	switch name {
	case settings.SchedulerExtenderEnabled:
		s.SchedulerExtenderEnabled = prev.SchedulerExtenderEnabled
	case settings.SchedulerExtenderPodSchedulingTimeout:
		s.PodSchedulingTimeout = prev.PodSchedulingTimeout
	case settings.SchedulerExtenderNodeReservationTimeout:
		s.NodeReservationTimeout = prev.NodeReservationTimeout
	}
}
