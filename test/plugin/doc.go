// Package plugin runs the second scheduler's plugin build
// (cmd/diskschedule-scheduler: kube-scheduler with the diskschedule plugin
// compiled in) as a process against a real kube-apiserver, with the
// manager deciding the ledgers, and schedules pods through it: the plugin
// at kube-scheduler's extension points as a cluster runs it, where the
// tests of internal/schedulerplugin call them one by one.
package plugin
