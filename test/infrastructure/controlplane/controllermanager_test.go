package controlplane

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestControllerManagerArgs(t *testing.T) {
	files := controllerManagerFiles{kubeconfig: "/d/kcm.kubeconfig", rootCA: "/d/ca.crt"}
	args := controllerManagerArgs(ControllerManagerOptions{
		Controllers:            []string{StatefulSetController, PersistentVolumeBinderController},
		ServiceAccountKeyFile:  "/d/sa.key",
		NodeMonitorGracePeriod: 10 * time.Second,
	}, files, 12345)
	for _, want := range []string{
		"--kubeconfig=/d/kcm.kubeconfig", "--root-ca-file=/d/ca.crt", "--secure-port=12345", "--bind-address=127.0.0.1",
		"--controllers=statefulset-controller,persistentvolume-binder-controller", "--leader-elect=false",
		"--use-service-account-credentials=true", "--service-account-private-key-file=/d/sa.key",
		"--node-monitor-grace-period=10s",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}

	args = controllerManagerArgs(ControllerManagerOptions{Controllers: VolumeControllers()}, files, 1)
	for _, a := range args {
		if strings.HasPrefix(a, "--node-monitor-grace-period") || strings.HasPrefix(a, "--service-account-private-key-file") {
			t.Errorf("unset options are passed: %s", a)
		}
	}
}

func TestDefaultControllers(t *testing.T) {
	got := DefaultControllers()
	for _, want := range []string{
		StatefulSetController, ReplicaSetController, DeploymentController, GarbageCollectorController,
		PersistentVolumeBinderController, PersistentVolumeExpanderController, NodeLifecycleController,
		DisruptionController, EndpointSliceController, ServiceAccountController, ServiceAccountTokenController,
	} {
		if !slices.Contains(got, want) {
			t.Errorf("DefaultControllers() = %v lacks %s", got, want)
		}
	}
}

func TestWriteServiceAccountKey(t *testing.T) {
	path, err := WriteServiceAccountKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "EC PRIVATE KEY" {
		t.Fatalf("%s holds no EC private key: %q", path, data)
	}
	if _, err := x509.ParseECPrivateKey(block.Bytes); err != nil {
		t.Errorf("parsing the key: %v", err)
	}
}
