package extender

import (
	"context"
	"sync/atomic"

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

// liveSettings reads the scheduling settings in effect: Longhorn's Setting
// objects through the manager's cache, with the extender's own settings
// from the ConfigStore over them, so a change of either applies without a
// restart. While the extender follows the Settings' events (follow), what
// it read of them is kept until the next event (longhorn), so a filter
// does not list and parse every Setting.
type liveSettings struct {
	reader    client.Reader
	namespace string
	config    ConfigStore
	longhorn  *settingsCache
}

// settingsCache is what was last read of Longhorn's Settings, good until
// one of them changes.
type settingsCache struct {
	// following is true while Setting events reach changed.
	following atomic.Bool
	// version counts the changes seen; last is good while its version is.
	version atomic.Uint64
	last    atomic.Pointer[readSettings]
}

// readSettings are the settings read at a version of settingsCache.
type readSettings struct {
	version uint64
	s       settings.Scheduling
}

// changed forgets what was read: a Setting changed.
func (c *settingsCache) changed() { c.version.Add(1) }

// get returns the settings in effect now.
func (l liveSettings) get(ctx context.Context) (settings.Scheduling, error) {
	s, err := l.readLonghorn(ctx)
	if err != nil {
		return settings.Scheduling{}, err
	}
	own := l.config.Get()
	s.SchedulerExtenderEnabled = own.Enabled
	s.PodSchedulingTimeout = own.PodSchedulingTimeout
	s.NodeReservationTimeout = own.NodeReservationTimeout
	return s, nil
}

// readLonghorn returns Longhorn's settings, as last read while no Setting
// changed since, or read now.
func (l liveSettings) readLonghorn(ctx context.Context) (settings.Scheduling, error) {
	c := l.longhorn
	var version uint64
	if c != nil && c.following.Load() {
		version = c.version.Load()
		if last := c.last.Load(); last != nil && last.version == version {
			return last.s, nil
		}
	}
	// The Settings are only read: skipping the cache's deep copy keeps the
	// filter's serial cost low. Longhorn validates its own settings; an
	// invalid one has its default here, so the returned errors are dropped.
	s, _, err := clusterview.Settings(ctx, l.reader, l.namespace, client.UnsafeDisableDeepCopy)
	if err != nil {
		return settings.Scheduling{}, err
	}
	if c != nil && c.following.Load() {
		// A change seen meanwhile has moved the version on: this reading
		// is not used for it.
		c.last.Store(&readSettings{version: version, s: s})
	}
	return s, nil
}
