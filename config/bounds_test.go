package config_test

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/config"
)

// TestReplicaBoundIsTheGates: the CRD bounds a ledger's replica maps at
// dsv1.MaxReplicaEntries, the bound the admission gate checks and names
// when it denies a placement on a full ledger.
func TestReplicaBoundIsTheGates(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(config.DiskScheduleCRD, crd); err != nil {
		t.Fatal(err)
	}
	schema := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, path := range [][]string{{"spec", "replicas"}, {"spec", "replicaVersions"}, {"status", "replicas"}} {
		p := schema.Properties[path[0]].Properties[path[1]]
		if p.MaxProperties == nil || *p.MaxProperties != dsv1.MaxReplicaEntries {
			t.Errorf("%s.%s maxProperties = %v, want dsv1.MaxReplicaEntries (%d)", path[0], path[1], p.MaxProperties, dsv1.MaxReplicaEntries)
		}
	}
}
