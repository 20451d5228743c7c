package schedulerplugin

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/controller/config"
)

// configStore reads the extender's settings, the keys of the ConfigMap
// settings.ConfigMapName, from the plugin's cache at each Get, parsed as
// the manager's config controller parses them (config.Next): an invalid
// value keeps the previous one. The manager records the Warning Event.
type configStore struct {
	reader client.Reader
	key    types.NamespacedName

	mu   sync.Mutex
	last config.Extender
}

// newConfigStore returns a configStore at the defaults.
func newConfigStore(reader client.Reader, key types.NamespacedName) *configStore {
	return &configStore{reader: reader, key: key, last: config.DefaultExtender()}
}

// Get returns the settings in effect; the last ones read when the cache
// cannot be read.
func (s *configStore) Get() config.Extender {
	cm := &corev1.ConfigMap{}
	err := s.reader.Get(context.Background(), s.key, cm, client.UnsafeDisableDeepCopy)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case apierrors.IsNotFound(err):
		s.last, _ = config.Next(s.last, nil)
	case err == nil:
		s.last, _ = config.Next(s.last, cm)
	}
	return s.last
}
