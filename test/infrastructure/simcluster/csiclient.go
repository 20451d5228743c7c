package simcluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-lib-utils/accessmodes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// csiTimeout bounds each call of the CSI sidecars to the driver: the
// --timeout=1m50s Longhorn v1.12 gives its external-provisioner and
// external-resizer.
const csiTimeout = 110 * time.Second

// csiParameterPrefix prefixes the class parameters the CSI
// external-provisioner keeps for itself and does not pass to CreateVolume.
const csiParameterPrefix = "csi.storage.k8s.io/"

// csiDefaultFSType is the external-provisioner's --default-fstype, as
// Longhorn v1.12 passes it.
const csiDefaultFSType = "ext4"

// csiConnection is the CSI sidecars' connection to Longhorn's CSI driver:
// Longhorn v1.12.0's own Identity and Controller services, served on a Unix
// socket (Options.CSIEndpoint) by sandbox-longhorn. It connects at its
// first call and, as the sidecars do at start, asks the driver's
// controller capabilities once.
type csiConnection struct {
	endpoint string

	mu         sync.Mutex
	conn       *grpc.ClientConn
	controller csi.ControllerClient
	caps       map[csi.ControllerServiceCapability_RPC_Type]bool
}

// client returns the driver's controller service and its capabilities.
func (c *csiConnection) client(ctx context.Context) (csi.ControllerClient, map[csi.ControllerServiceCapability_RPC_Type]bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		conn, err := grpc.NewClient("unix://"+c.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, nil, fmt.Errorf("connecting to Longhorn's CSI driver at %s: %w", c.endpoint, err)
		}
		c.conn, c.controller = conn, csi.NewControllerClient(conn)
	}
	if c.caps == nil {
		ctx, cancel := context.WithTimeout(ctx, csiTimeout)
		defer cancel()
		rsp, err := c.controller.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
		if err != nil {
			return nil, nil, fmt.Errorf("asking Longhorn's CSI driver at %s for its capabilities: %w", c.endpoint, err)
		}
		caps := map[csi.ControllerServiceCapability_RPC_Type]bool{}
		for _, cap := range rsp.GetCapabilities() {
			caps[cap.GetRpc().GetType()] = true
		}
		c.caps = caps
	}
	return c.controller, c.caps, nil
}

// close closes the connection, if any.
func (c *csiConnection) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn, c.controller = nil, nil
	return err
}

// csiParameters are the class parameters the CSI external-provisioner
// passes to CreateVolume: all but its own csi.storage.k8s.io/ ones.
func csiParameters(class *storagev1.StorageClass) map[string]string {
	params := map[string]string{}
	for k, v := range class.Parameters {
		if !strings.HasPrefix(k, csiParameterPrefix) {
			params[k] = v
		}
	}
	return params
}

// csiFSType is the filesystem the external-provisioner asks for: the
// class's fstype (any case) or csi.storage.k8s.io/fstype parameter, or its
// default; both at once is an error.
func csiFSType(class *storagev1.StorageClass) (string, error) {
	fsType, found := "", 0
	for k, v := range class.Parameters {
		if strings.ToLower(k) == "fstype" || k == csiParameterPrefix+"fstype" {
			fsType = v
			found++
		}
	}
	if found > 1 {
		return "", fmt.Errorf("fstype specified in parameters with both \"fstype\" and \"%sfstype\" keys", csiParameterPrefix)
	}
	if fsType == "" {
		fsType = csiDefaultFSType
	}
	return fsType, nil
}

// csiVolumeCapability is the capability the CSI sidecars ask for a volume
// of access modes modes: mount (with fsType and the mount options) or
// block by the volume mode, and the access mode as
// csi-lib-utils/accessmodes maps it, SINGLE_NODE_MULTI_WRITER for
// ReadWriteOnce when the driver advertises it (Longhorn's does).
func csiVolumeCapability(modes []corev1.PersistentVolumeAccessMode, volumeMode *corev1.PersistentVolumeMode, fsType string, mountOptions []string,
	caps map[csi.ControllerServiceCapability_RPC_Type]bool) (*csi.VolumeCapability, error) {
	mode, err := accessmodes.ToCSIAccessMode(modes, caps[csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER])
	if err != nil {
		return nil, err
	}
	c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
	if volumeMode != nil && *volumeMode == corev1.PersistentVolumeBlock {
		c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType, MountFlags: mountOptions}}
	}
	return c, nil
}

// provisioningState is the state the CSI external-provisioner gives a
// failed CreateVolume (its checkError, without rescheduling: the claims
// here never ask for ResourceExhausted): in the background when the call
// may still be running, finished otherwise.
func provisioningState(err error) controller.ProvisioningState {
	st, ok := status.FromError(err)
	if !ok {
		return controller.ProvisioningInBackground
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.Aborted:
		return controller.ProvisioningInBackground
	}
	return controller.ProvisioningFinished
}
