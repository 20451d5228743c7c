// Package settings parses Longhorn's scheduling settings (Setting objects
// named by the setting, holding a string value) into typed values with the
// documented defaults. It has no client: callers pass the objects they read.
package settings
