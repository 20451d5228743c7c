// Package config watches the extender's ConfigMap, diskschedule-config in
// the manager's namespace (DESIGN §6), and keeps its three settings in a
// Store the rest of the manager reads: scheduler-extender-enabled,
// scheduler-extender-pod-scheduling-timeout and
// scheduler-extender-node-reservation-timeout. Changes apply without a
// restart. A missing key (or a missing ConfigMap) is the setting's default;
// an invalid value keeps the value in effect and records a Warning Event on
// the ConfigMap. The ConfigMap is only read: it belongs to whoever deploys
// the add-on.
package config
