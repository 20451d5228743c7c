// Package settings parses the scheduling settings into typed values with
// their defaults: Longhorn's own (Setting objects of Longhorn's namespace,
// read only, Longhorn v1.12's defaults when missing) and the extender's
// (keys of the ConfigMap diskschedule-config). It has no client: callers
// pass the objects they read.
package settings
