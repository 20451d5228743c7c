package config_test

import (
	"path"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/longhorn/diskschedule/internal/extender"
	"github.com/longhorn/diskschedule/test/framework/schedulerconfig"
)

// secretFile is a file of a projected volume: the Secret and key it comes from.
type secretFile struct{ secret, key string }

// projectedSecretFiles maps each file a container sees of its projected
// volumes (mount path joined with the item's path) to the Secret key it
// holds.
func projectedSecretFiles(spec corev1.PodSpec, container int) map[string]secretFile {
	mounts := map[string]string{}
	for _, m := range spec.Containers[container].VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	files := map[string]secretFile{}
	for _, v := range spec.Volumes {
		if v.Projected == nil || mounts[v.Name] == "" {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.Secret == nil {
				continue
			}
			for _, item := range src.Secret.Items {
				files[path.Join(mounts[v.Name], item.Path)] = secretFile{src.Secret.Name, item.Key}
			}
		}
	}
	return files
}

// flagValue returns the value of --name in args, or def when absent.
func flagValue(args []string, name, def string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return def
}

// The manager mounts the extender's serving pair where --extender-cert-dir
// (its default) reads it and the client CA at --extender-client-ca-file,
// from the Secrets its rotators fill; the chart and config/default ship
// those Secrets. The defaults are cmd/main.go's.
func TestManagerMountsTheExtendersCertificates(t *testing.T) {
	const certDir, clientCA = "/etc/diskschedule/extender", "/etc/diskschedule/extender/client/ca.crt"
	for name, objs := range map[string][]*unstructured.Unstructured{"chart": mustRenderChart(t, nil), "config/default": renderKustomization(t, "default")} {
		d := managerDeployment(t, objs)
		args := d.Spec.Template.Spec.Containers[0].Args
		files := projectedSecretFiles(d.Spec.Template.Spec, 0)
		for file, want := range map[string]secretFile{
			path.Join(flagValue(args, "extender-cert-dir", certDir), corev1.TLSCertKey):       {extender.ServingSecretName, corev1.TLSCertKey},
			path.Join(flagValue(args, "extender-cert-dir", certDir), corev1.TLSPrivateKeyKey): {extender.ServingSecretName, corev1.TLSPrivateKeyKey},
			flagValue(args, "extender-client-ca-file", clientCA):                              {extender.ClientSecretName, "ca.crt"},
			// The client rotator waits for its certificate beside the CA.
			path.Join(path.Dir(flagValue(args, "extender-client-ca-file", clientCA)), corev1.TLSCertKey): {extender.ClientSecretName, corev1.TLSCertKey},
		} {
			if got := files[file]; got != want {
				t.Errorf("%s: the manager's %s holds %+v, want %+v", name, file, got, want)
			}
		}
		for _, secret := range []string{extender.ServingSecretName, extender.ClientSecretName} {
			found := false
			for _, u := range objs {
				found = found || (u.GetKind() == "Secret" && u.GetName() == secret)
			}
			if !found {
				t.Errorf("%s ships no Secret %s for the manager to fill", name, secret)
			}
		}
	}
}

// The extender's Service, in config/ and in the chart, names its port as
// the EndpointSlice the leader writes does (extender.PortName): kube-proxy
// routes a Service port only to the endpoint port of the same name.
func TestExtenderPortNamesAgree(t *testing.T) {
	for name, objs := range map[string][]*unstructured.Unstructured{"chart": mustRenderChart(t, nil), "config/default": renderKustomization(t, "default")} {
		found := false
		for _, u := range objs {
			if u.GetKind() != "Service" || u.GetName() != extender.ServiceName {
				continue
			}
			found = true
			svc := decodeAs[corev1.Service](t, u)
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != extender.PortName || svc.Spec.Ports[0].Port != extender.Port {
				t.Errorf("%s: Service %s ports %+v, want one named %q on %d as the EndpointSlice's", name, svc.Name, svc.Spec.Ports, extender.PortName, extender.Port)
			}
		}
		if !found {
			t.Errorf("%s renders no Service %s", name, extender.ServiceName)
		}
	}
}

// extender.bind sets the manager's --extender-bind; without it the
// manager does not bind. The chart's second scheduler calls no extender
// whatever extender.bind says: its plugin reserves before it binds.
func TestChartExtenderBind(t *testing.T) {
	for _, bind := range []bool{false, true} {
		objs := mustRenderChart(t, map[string]any{"extender": map[string]any{"bind": bind}, "scheduler": map[string]any{"enabled": true}})
		args := managerDeployment(t, objs).Spec.Template.Spec.Containers[0].Args
		if got := flagValue(args, "extender-bind", "false"); got != map[bool]string{false: "false", true: "true"}[bind] {
			t.Errorf("extender.bind=%v: the manager's --extender-bind is %s", bind, got)
		}
		found := false
		for _, u := range objs {
			if u.GetKind() == "ConfigMap" && u.GetName() == "longhorn-diskschedule-scheduler-config" {
				data, _, _ := unstructured.NestedString(u.Object, "data", "config.yaml")
				if _, err := schedulerconfig.Parse([]byte(data)); err != nil {
					t.Errorf("extender.bind=%v: %v", bind, err)
				}
				found = true
			}
		}
		if !found {
			t.Errorf("extender.bind=%v: no second scheduler configuration", bind)
		}
	}
}
