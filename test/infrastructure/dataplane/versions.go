package dataplane

import (
	enginemeta "github.com/longhorn/longhorn-engine/pkg/meta"
	immeta "github.com/longhorn/longhorn-instance-manager/pkg/meta"
	"github.com/longhorn/types/pkg/generated/enginerpc"
	"github.com/longhorn/types/pkg/generated/imrpc"
)

// Version is the version every service of the simulated data plane reports.
const Version = "v1.12.0-sandbox"

// instanceManagerVersion is what the instance service and the process
// manager answer to VersionGet: the API versions of longhorn-instance-manager
// v1.12.0 (its pkg/meta).
func instanceManagerVersion() *imrpc.VersionResponse {
	return &imrpc.VersionResponse{
		Version:                           Version,
		InstanceManagerAPIVersion:         int64(immeta.InstanceManagerAPIVersion),
		InstanceManagerAPIMinVersion:      int64(immeta.InstanceManagerAPIMinVersion),
		InstanceManagerProxyAPIVersion:    int64(immeta.InstanceManagerProxyAPIVersion),
		InstanceManagerProxyAPIMinVersion: int64(immeta.InstanceManagerProxyAPIMinVersion),
	}
}

// engineVersion is what an engine answers through the proxy: the API
// versions of longhorn-engine v1.12.0 (its pkg/meta).
func engineVersion() *enginerpc.VersionOutput {
	return &enginerpc.VersionOutput{
		Version:                 Version,
		CliAPIVersion:           int64(enginemeta.CLIAPIVersion),
		CliAPIMinVersion:        int64(enginemeta.CLIAPIMinVersion),
		ControllerAPIVersion:    int64(enginemeta.ControllerAPIVersion),
		ControllerAPIMinVersion: int64(enginemeta.ControllerAPIMinVersion),
		DataFormatVersion:       int64(enginemeta.DataFormatVersion),
		DataFormatMinVersion:    int64(enginemeta.DataFormatMinVersion),
	}
}
