// Package config holds the deployment manifests. The gate's webhook
// configuration is embedded so the sandbox and the tests register the very
// configuration `make deploy` installs, pointed at a local address.
package config

import _ "embed"

// GateWebhookConfiguration is config/webhook/manifests.yaml: the
// ValidatingWebhookConfiguration diskschedule-gate.
//
//go:embed webhook/manifests.yaml
var GateWebhookConfiguration []byte

// PodWebhookConfiguration is config/webhook/pods.yaml: the
// MutatingWebhookConfiguration diskschedule-pods.
//
//go:embed webhook/pods.yaml
var PodWebhookConfiguration []byte

// SecondarySchedulerConfiguration is
// config/scheduler/secondary/kube-scheduler-config.yaml: the second
// scheduler's KubeSchedulerConfiguration, which the component there, the
// chart and the sandbox all run.
//
//go:embed scheduler/secondary/kube-scheduler-config.yaml
var SecondarySchedulerConfiguration []byte

// DiskScheduleCRD is config/crd/bases/longhorn.io_diskschedules.yaml: the one
// CRD the add-on installs, which the manager compares with the CRD of that
// name on the cluster before it starts.
//
//go:embed crd/bases/longhorn.io_diskschedules.yaml
var DiskScheduleCRD []byte
