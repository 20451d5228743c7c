package config

import (
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/longhorn/diskschedule/internal/settings"
)

// Extender holds the extender's settings in effect.
type Extender struct {
	// Enabled is scheduler-extender-enabled.
	Enabled bool
	// PodSchedulingTimeout is scheduler-extender-pod-scheduling-timeout.
	PodSchedulingTimeout time.Duration
	// NodeReservationTimeout is scheduler-extender-node-reservation-timeout:
	// how long a granted reservation waits for a replica (ledger rule 6).
	NodeReservationTimeout time.Duration
}

// DefaultExtender returns the extender's settings at their defaults.
func DefaultExtender() Extender {
	return fromScheduling(settings.Default())
}

func fromScheduling(s settings.Scheduling) Extender {
	return Extender{
		Enabled:                s.SchedulerExtenderEnabled,
		PodSchedulingTimeout:   s.PodSchedulingTimeout,
		NodeReservationTimeout: s.NodeReservationTimeout,
	}
}

// String lists the settings by their ConfigMap keys, for events and logs.
func (e Extender) String() string {
	return fmt.Sprintf("%s=%t, %s=%d, %s=%d",
		settings.SchedulerExtenderEnabled, e.Enabled,
		settings.SchedulerExtenderPodSchedulingTimeout, int64(e.PodSchedulingTimeout/time.Second),
		settings.SchedulerExtenderNodeReservationTimeout, int64(e.NodeReservationTimeout/time.Second))
}

// Store holds the extender's settings in effect; it is safe for concurrent
// use. It starts at the defaults until the Reconciler has read the ConfigMap.
type Store struct {
	mu      sync.RWMutex
	current Extender
	changes chan event.GenericEvent
}

// NewStore returns a Store at the defaults.
func NewStore() *Store {
	return &Store{current: DefaultExtender(), changes: make(chan event.GenericEvent, 1)}
}

// Get returns the settings in effect.
func (s *Store) Get() Extender {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.current
}

// NodeReservationTimeout returns scheduler-extender-node-reservation-timeout.
func (s *Store) NodeReservationTimeout() time.Duration {
	return s.Get().NodeReservationTimeout
}

// ReservationTimeoutChanges delivers an event each time the node
// reservation timeout changes, for a controller to watch (source.Channel)
// and decide its ledgers again. Changes that follow one another before the
// event is read are delivered as one.
func (s *Store) ReservationTimeoutChanges() <-chan event.GenericEvent {
	return s.changes
}

// set makes next the settings in effect and reports whether they changed;
// cause is the object the change came from, passed on in the change event.
func (s *Store) set(next Extender, cause client.Object) bool {
	s.mu.Lock()
	prev := s.current
	s.current = next
	s.mu.Unlock()
	if prev.NodeReservationTimeout != next.NodeReservationTimeout {
		select {
		case s.changes <- event.GenericEvent{Object: cause}:
		default: // one event is already waiting: it covers this change too
		}
	}
	return prev != next
}
