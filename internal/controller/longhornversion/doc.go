// Package longhornversion follows the Longhorn release the add-on runs
// next to (DESIGN §7), from Longhorn's own Setting current-longhorn-version
// (read, never written): it logs the version, exports it as the label of
// longhorn_diskschedule_longhorn_version_info, records an Event on the
// Setting when it changes, and says in words when it is outside the
// releases the project is tested against (Tested), whose differences that
// matter here are in docs/longhorn-versions.md.
package longhornversion
