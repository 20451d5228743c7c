package extender

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/clusterview"
	"github.com/longhorn/diskschedule/internal/controller/config"
	"github.com/longhorn/diskschedule/internal/settings"
)

// ConfigStore is where the extender reads its own settings, the keys of the
// ConfigMap settings.ConfigMapName: config.Store, which the config
// controller keeps. That controller is the one keeper of their values: an
// invalid value keeps the previous one there and records a Warning Event on
// the ConfigMap.
type ConfigStore interface {
	// Get returns the extender's settings in effect.
	Get() config.Extender
}

// liveSettings reads the scheduling settings on every call: Longhorn's
// Setting objects through the manager's cache, with the extender's own
// settings from the ConfigStore over them, so a change of either applies
// without a restart.
type liveSettings struct {
	reader    client.Reader
	namespace string
	config    ConfigStore
}

// get returns the settings in effect now.
func (l liveSettings) get(ctx context.Context) (settings.Scheduling, error) {
	// The Settings are only read: skipping the cache's deep copy keeps the
	// filter's serial cost low. Longhorn validates its own settings; an
	// invalid one has its default here, so the returned errors are dropped.
	s, _, err := clusterview.Settings(ctx, l.reader, l.namespace, client.UnsafeDisableDeepCopy)
	if err != nil {
		return settings.Scheduling{}, err
	}
	own := l.config.Get()
	s.SchedulerExtenderEnabled = own.Enabled
	s.PodSchedulingTimeout = own.PodSchedulingTimeout
	s.NodeReservationTimeout = own.NodeReservationTimeout
	return s, nil
}
