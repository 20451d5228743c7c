// Package longhorncrds loads Longhorn's own CustomResourceDefinitions, as
// Longhorn v1.12.0 (and each release in TestedVersions) ships them in
// k8s/crds.yaml of the longhorn-manager Go module, for tests and the sandbox
// to install. They are never copied into
// this repository nor edited: the one line rewritten is the Helm template of
// each CRD's labels, which is not YAML until Helm renders it.
package longhorncrds

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Module is the Go module that ships Longhorn's types and CRDs.
const Module = "github.com/longhorn/longhorn-manager"

// Version is the Longhorn release whose CRDs Load loads and whose Go types
// the project imports; it must match the version of Module in go.mod.
const Version = "v1.12.0"

// TestedVersions are the Longhorn releases the project is tested against,
// oldest first: the contract tests install each one's own CRDs
// (LoadVersion). The last is Version.
func TestedVersions() []string { return []string{"v1.10.0", "v1.11.1", Version} }

// helmLabels matches the Helm template that stands for each CRD's labels in
// crds.yaml, e.g. `labels: {{- include "longhorn.labels" . | nindent 4 }}`.
var helmLabels = regexp.MustCompile(`(?m)^(\s*)labels:\s*\{\{.*\}\}\s*$`)

// ModuleDir returns the directory of Module at Version in the Go module
// cache, downloading it through the module proxy when it is missing.
func ModuleDir() (string, error) {
	if dir := os.Getenv("LONGHORN_MANAGER_DIR"); dir != "" {
		return dir, nil
	}
	return moduleDirOf(Version)
}

// moduleDirOf returns the directory of Module at version in the Go module
// cache, downloading it through the module proxy when it is missing.
func moduleDirOf(version string) (string, error) {
	if dir, err := cachedDir(version); err == nil {
		return dir, nil
	}
	cmd := exec.Command("go", "mod", "download", "-json", Module+"@"+version)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating %s@%s with `go mod download`: %w: %s", Module, version, err, stderr.String())
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("reading `go mod download` output: %w", err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("downloading %s@%s: %s", Module, version, info.Error)
	}
	return info.Dir, nil
}

// cachedDir finds the module at version in GOMODCACHE without running the
// go command.
func cachedDir(version string) (string, error) {
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		gopath := os.Getenv("GOPATH")
		if gopath == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", err
			}
			gopath = filepath.Join(home, "go")
		}
		cache = filepath.Join(filepath.SplitList(gopath)[0], "pkg", "mod")
	}
	dir := filepath.Join(cache, "github.com", "longhorn", "longhorn-manager@"+version)
	if _, err := os.Stat(filepath.Join(dir, "k8s", "crds.yaml")); err != nil {
		return "", err
	}
	return dir, nil
}

// CheckBuildVersion returns an error when the binary was built with another
// version of Module than the CRDs this package loads.
func CheckBuildVersion() error {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	for _, dep := range info.Deps {
		if dep.Path == Module && dep.Version != Version {
			return fmt.Errorf("built with %s %s, but loading the CRDs of %s", Module, dep.Version, Version)
		}
	}
	return nil
}

// Load returns Longhorn's CRDs from the module's k8s/crds.yaml at Version.
func Load() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := ModuleDir()
	if err != nil {
		return nil, err
	}
	return loadDir(dir)
}

// LoadVersion returns the CRDs of another Longhorn release, from k8s/crds.yaml
// of Module at version in the Go module cache (fetched through the module
// proxy when missing): tests install them to hold the project against the
// releases it names (TestedVersions). Never copied into the repository.
func LoadVersion(version string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	if version == Version {
		return Load()
	}
	dir, err := moduleDirOf(version)
	if err != nil {
		return nil, err
	}
	return loadDir(dir)
}

// loadDir reads k8s/crds.yaml of the module in dir.
func loadDir(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	path := filepath.Join(dir, "k8s", "crds.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading Longhorn's CRDs: %w", err)
	}
	crds, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return crds, nil
}

// Parse decodes crds.yaml, replacing each Helm labels template with the
// labels Longhorn's chart renders for them (app.kubernetes.io/name: longhorn).
func Parse(data []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	rendered := helmLabels.ReplaceAll(data, []byte("${1}labels:\n${1}  app.kubernetes.io/name: longhorn"))
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(rendered), 4096)
	var out []*apiextensionsv1.CustomResourceDefinition
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(crd); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("decoding CRD %d: %w", len(out)+1, err)
		}
		if crd.Name == "" {
			continue
		}
		out = append(out, crd)
	}
	if len(out) == 0 {
		return nil, errors.New("no CustomResourceDefinition found")
	}
	return out, nil
}
