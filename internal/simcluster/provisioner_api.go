package simcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	longhornclient "github.com/longhorn/longhorn-manager/client"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhtypes "github.com/longhorn/longhorn-manager/types"
	lhutil "github.com/longhorn/longhorn-manager/util"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// Waits of Longhorn v1.12.0's CSI driver for the volume it created or
// deleted (csi/controller_server.go, waitForVolumeState): at most
// volumeStateTimeout (its timeoutAttachDetach). It asks Longhorn's API
// every 2 s (tickAttachDetach); here every volumeStateTick, so that the
// sandbox's provisioning is not slower than Longhorn's controllers.
const (
	volumeStateTimeout = 90 * time.Second
	volumeStateTick    = 250 * time.Millisecond
)

// csiParameterPrefix prefixes the class parameters the CSI
// external-provisioner keeps for itself and does not pass to CreateVolume.
const csiParameterPrefix = "csi.storage.k8s.io/"

// longhornAPI is a client of longhorn-manager's REST API, made at its
// first use (the client reads the API's schemas when it is made).
type longhornAPI struct {
	url    string
	mu     sync.Mutex
	client *longhornclient.RancherClient
}

func (a *longhornAPI) get() (*longhornclient.RancherClient, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.client != nil {
		return a.client, nil
	}
	c, err := longhornclient.NewRancherClient(&longhornclient.ClientOpts{Url: a.url, Timeout: apiTimeout})
	if err != nil {
		return nil, fmt.Errorf("reaching Longhorn's API at %s: %w", a.url, err)
	}
	a.client = c
	return c, nil
}

// createVolume is Longhorn v1.12.0's CSI CreateVolume
// (csi/controller_server.go) for the claim's volume name, as the CSI
// external-provisioner calls it: an existing volume of the requested size
// is kept; otherwise the request getVolumeOptions builds from the class
// parameters and the claim's access modes (volumeRequest) goes to
// Longhorn's API (Volume.Create, which is Longhorn's VolumeManager.Create
// and its admission webhooks), after the backing image is checked or
// created as the driver does, and the volume is awaited out of the
// creating state. It returns the Longhorn Volume with the name and size
// Longhorn answered. Its errors are gRPC statuses as the driver answers
// them: InvalidArgument for a request Longhorn's driver refuses, Internal
// with Longhorn's message for a refusal of Longhorn's API, DeadlineExceeded
// when the volume is not created in time.
func (a *longhornAPI) createVolume(ctx context.Context, pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, name string) (*lhv1.Volume, error) {
	if err := accessModesSupported(pvc); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	size, err := requestedSize(pvc)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	params := csiParameters(class)
	c, err := a.get()
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	existing, err := c.Volume.ById(name)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if existing != nil {
		have, err := lhutil.ConvertSize(existing.Size)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if have != size {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s size %v differs from requested size %v", existing.Name, have, size)
		}
		return apiVolume(existing, have), nil
	}
	req, err := volumeRequest(pvc, params)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := prepareBackingImage(c, name, req.BackingImage, params, req.DataEngine); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	req.Name = name
	req.Size = strconv.FormatInt(size, 10)
	created, err := c.Volume.Create(req)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	got, err := lhutil.ConvertSize(created.Size)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if !waitForVolume(ctx, c, created.Id, func(v *longhornclient.Volume) bool {
		return v != nil && v.State != "" && v.State != string(lhv1.VolumeStateCreating)
	}) {
		return nil, status.Error(codes.DeadlineExceeded, "failed to wait for volume creation to complete")
	}
	return apiVolume(created, got), nil
}

// deleteVolume is Longhorn v1.12.0's CSI DeleteVolume: a volume Longhorn's
// API does not know is deleted; otherwise it is deleted through the API
// (Longhorn's VolumeManager.Delete) and awaited until it is gone. Errors
// are gRPC statuses as the driver answers them.
func (a *longhornAPI) deleteVolume(ctx context.Context, name string) error {
	c, err := a.get()
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	existing, err := c.Volume.ById(name)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if existing == nil {
		return nil
	}
	if err := c.Volume.Delete(existing); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if !waitForVolume(ctx, c, name, func(v *longhornclient.Volume) bool { return v == nil }) {
		return status.Errorf(codes.DeadlineExceeded, "failed to delete volume %s", name)
	}
	return nil
}

// waitForVolume asks Longhorn's API for volume name until done says so of
// its answer (nil once the volume is gone), for at most
// volumeStateTimeout, as the driver's waitForVolumeState does; a failed
// call is asked again.
func waitForVolume(ctx context.Context, c *longhornclient.RancherClient, name string, done func(*longhornclient.Volume) bool) bool {
	ctx, cancel := context.WithTimeout(ctx, volumeStateTimeout)
	defer cancel()
	tick := time.NewTicker(volumeStateTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
			v, err := c.Volume.ById(name)
			if err == nil && done(v) {
				return true
			}
		}
	}
}

// apiVolume is the Longhorn Volume Longhorn's API answered: its name and
// size, which the PersistentVolume carries.
func apiVolume(v *longhornclient.Volume, size int64) *lhv1.Volume {
	return &lhv1.Volume{ObjectMeta: metav1.ObjectMeta{Name: v.Name}, Spec: lhv1.VolumeSpec{Size: size}}
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

// requestedSize is the size Longhorn's CreateVolume asks for a claim: the
// claim's request, at least Longhorn's minimal volume size (10 MiB),
// rounded up to its 2 MiB alignment.
func requestedSize(pvc *corev1.PersistentVolumeClaim) (int64, error) {
	q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok || q.Sign() <= 0 {
		return 0, fmt.Errorf("claim %s/%s requests no storage", pvc.Namespace, pvc.Name)
	}
	return lhutil.RoundUpSize(max(q.Value(), lhutil.MinimalVolumeSize)), nil
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

// accessModesSupported refuses a ReadOnlyMany claim, as Longhorn v1.12.0's
// CreateVolume does first (validateVolumeCapabilities: the external
// provisioner asks for MULTI_NODE_READER_ONLY, which the driver does not
// offer).
func accessModesSupported(pvc *corev1.PersistentVolumeClaim) error {
	for _, m := range pvc.Spec.AccessModes {
		if m == corev1.ReadOnlyMany {
			return errors.New("access mode MULTI_NODE_READER_ONLY is not supported")
		}
	}
	return nil
}

// volumeRequest is the volume Longhorn v1.12.0's CreateVolume asks
// Longhorn's API for, name and size aside: the claim's first access mode
// that asks for sharing (ReadWriteMany) or exclusivity (ReadWriteOncePod)
// sets the share or exclusive parameter, then getVolumeOptions
// (csi/util.go) reads the parameters. params gains what CreateVolume adds
// to it.
func volumeRequest(pvc *corev1.PersistentVolumeClaim, params map[string]string) (*longhornclient.Volume, error) {
	for _, m := range pvc.Spec.AccessModes {
		if m == corev1.ReadWriteMany {
			params["share"] = "true"
			break
		}
		if m == corev1.ReadWriteOncePod {
			params["exclusive"] = "true"
			break
		}
	}
	return volumeOptions(params)
}

// volumeOptions follows Longhorn v1.12.0's getVolumeOptions (csi/util.go):
// the Longhorn API volume of the CSI request's parameters, with its
// defaults (stale replica timeout 2880 minutes, access mode rwo, revision
// counter disabled, data engine v1) and Longhorn's validations.
func volumeOptions(params map[string]string) (*longhornclient.Volume, error) {
	vol := &longhornclient.Volume{}
	invalid := func(param string, err error) error {
		if err == nil {
			err = errors.New("out of range")
		}
		return fmt.Errorf("invalid parameter %s: %w", param, err)
	}
	boolParam := func(param string) (value, ok bool, err error) {
		s, ok := params[param]
		if !ok {
			return false, false, nil
		}
		value, err = strconv.ParseBool(s)
		if err != nil {
			return false, true, invalid(param, err)
		}
		return value, true, nil
	}
	intParam := func(param string) (int64, bool, error) {
		s, ok := params[param]
		if !ok {
			return 0, false, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, true, invalid(param, err)
		}
		return int64(n), true, nil
	}
	stringParam := func(param string, validate func(string) error) (string, error) {
		s, ok := params[param]
		if !ok {
			return "", nil
		}
		if err := validate(s); err != nil {
			return "", invalid(param, err)
		}
		return s, nil
	}

	n, _, err := intParam("staleReplicaTimeout")
	if err != nil {
		return nil, err
	}
	vol.StaleReplicaTimeout = n
	if vol.StaleReplicaTimeout <= 0 {
		vol.StaleReplicaTimeout = defaultStaleReplicaTimeout
	}

	shared, _, err := boolParam("share")
	if err != nil {
		return nil, err
	}
	if shared {
		vol.AccessMode = string(lhv1.AccessModeReadWriteMany)
	}
	exclusive, _, err := boolParam("exclusive")
	if err != nil {
		return nil, err
	}
	if exclusive && shared {
		return nil, errors.New("cannot set both share and exclusive to true")
	}
	if exclusive {
		vol.AccessMode = string(lhv1.AccessModeReadWriteOncePod)
	}
	if vol.AccessMode == "" {
		vol.AccessMode = string(lhv1.AccessModeReadWriteOnce)
	}
	migratable, ok, err := boolParam(ParamMigratable)
	if err != nil {
		return nil, err
	}
	if ok && migratable && vol.AccessMode != string(lhv1.AccessModeReadWriteMany) {
		// Longhorn logs it and creates a volume that is not migratable.
		params[ParamMigratable] = "false"
		migratable = false
	}
	vol.Migratable = migratable
	if vol.Encrypted, _, err = boolParam("encrypted"); err != nil {
		return nil, err
	}

	if s, ok := params[ParamNumberOfReplicas]; ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return nil, invalid(ParamNumberOfReplicas, err)
		}
		vol.NumberOfReplicas = int64(n)
	}
	if vol.UblkNumberOfQueue, _, err = intParam("ublkNumberOfQueue"); err != nil {
		return nil, err
	}
	if vol.UblkQueueDepth, _, err = intParam("ublkQueueDepth"); err != nil {
		return nil, err
	}
	if vol.ReplicaAutoBalance, err = stringParam("replicaAutoBalance", func(s string) error {
		return lhtypes.ValidateReplicaAutoBalance(lhv1.ReplicaAutoBalance(s))
	}); err != nil {
		return nil, err
	}
	if vol.DataLocality, err = stringParam(ParamDataLocality, func(s string) error {
		return lhtypes.ValidateDataLocality(lhv1.DataLocality(s))
	}); err != nil {
		return nil, err
	}
	disabled, ok, err := boolParam("disableRevisionCounter")
	if err != nil {
		return nil, err
	}
	vol.RevisionCounterDisabled = disabled || !ok // true unless the class says otherwise
	if vol.UnmapMarkSnapChainRemoved, err = stringParam("unmapMarkSnapChainRemoved", func(s string) error {
		// Longhorn validates it before it reads the data engine.
		return lhtypes.ValidateUnmapMarkSnapChainRemoved("", lhv1.UnmapMarkSnapChainRemoved(s))
	}); err != nil {
		return nil, err
	}
	if vol.ReplicaSoftAntiAffinity, err = stringParam("replicaSoftAntiAffinity", func(s string) error {
		return lhtypes.ValidateReplicaSoftAntiAffinity(lhv1.ReplicaSoftAntiAffinity(s))
	}); err != nil {
		return nil, err
	}
	if vol.ReplicaZoneSoftAntiAffinity, err = stringParam("replicaZoneSoftAntiAffinity", func(s string) error {
		return lhtypes.ValidateReplicaZoneSoftAntiAffinity(lhv1.ReplicaZoneSoftAntiAffinity(s))
	}); err != nil {
		return nil, err
	}
	if vol.ReplicaDiskSoftAntiAffinity, err = stringParam("replicaDiskSoftAntiAffinity", func(s string) error {
		return lhtypes.ValidateReplicaDiskSoftAntiAffinity(lhv1.ReplicaDiskSoftAntiAffinity(s))
	}); err != nil {
		return nil, err
	}
	vol.FromBackup = params["fromBackup"]
	vol.BackupTargetName = params["backupTargetName"]
	if s, ok := params["backupBlockSize"]; ok {
		size, err := lhutil.ConvertSize(s)
		if err != nil {
			return nil, invalid("backupBlockSize", err)
		}
		vol.BackupBlockSize = strconv.FormatInt(size, 10)
	}
	if s, ok := params["dataSource"]; ok {
		vol.DataSource = s
		vol.CloneMode = params["cloneMode"]
	}
	vol.BackingImage = params[ParamBackingImage]
	if s, ok := params["recurringJobSelector"]; ok {
		selector := []longhornclient.VolumeRecurringJob{}
		if err := json.Unmarshal([]byte(s), &selector); err != nil {
			return nil, fmt.Errorf("invalid json format of recurringJobSelector: %w", err)
		}
		vol.RecurringJobSelector = selector
	}
	if s, ok := params[ParamDiskSelector]; ok {
		vol.DiskSelector = strings.Split(s, ",")
	}
	if s, ok := params[ParamNodeSelector]; ok {
		vol.NodeSelector = strings.Split(s, ",")
	}
	vol.DataEngine = string(lhv1.DataEngineTypeV1)
	if s, ok := params["dataEngine"]; ok {
		vol.DataEngine = s
	}
	if vol.FreezeFilesystemForSnapshot, err = stringParam("freezeFilesystemForSnapshot", func(s string) error {
		return lhtypes.ValidateFreezeFilesystemForSnapshot(lhv1.FreezeFilesystemForSnapshot(s))
	}); err != nil {
		return nil, err
	}
	vol.Frontend = params["frontend"]
	return vol, nil
}

// prepareBackingImage is Longhorn v1.12.0's checkAndPrepareBackingImage
// (csi/controller_server.go): a volume's backing image that Longhorn's API
// does not know is created from the class's backingImageDataSourceType
// (download or export-from-volume, with its parameters), any other type
// refused; one it knows must match the class's data source and checksum.
func prepareBackingImage(c *longhornclient.RancherClient, volume, image string, params map[string]string, dataEngine string) error {
	if image == "" {
		return nil
	}
	sourceType := params[lhv1.BackingImageParameterDataSourceType]
	checksum := params[lhv1.BackingImageParameterChecksum]
	sourceParams := map[string]string{}
	if s := params[lhv1.BackingImageParameterDataSourceParameters]; s != "" {
		if err := json.Unmarshal([]byte(s), &sourceParams); err != nil {
			return fmt.Errorf("volume %s is unable to create missing backing image with parameters %s: %v", volume, s, err)
		}
	}
	existing, err := c.BackingImage.ById(image)
	if err != nil && !strings.Contains(err.Error(), "not found") {
		return fmt.Errorf("volume %s is unable to retrieve backing image %s: %v", volume, image, err)
	}
	if existing == nil || existing.Name == "" {
		switch lhv1.BackingImageDataSourceType(sourceType) {
		case lhv1.BackingImageDataSourceTypeDownload:
			if sourceParams[lhv1.DataSourceTypeDownloadParameterURL] == "" {
				return fmt.Errorf("volume %s missing parameters %v for preparing backing image", volume, lhv1.DataSourceTypeDownloadParameterURL)
			}
		case lhv1.BackingImageDataSourceTypeExportFromVolume:
			if sourceParams[lhv1.DataSourceTypeExportParameterExportType] == "" || sourceParams[lhv1.DataSourceTypeExportParameterVolumeName] == "" {
				return fmt.Errorf("volume %s missing parameters %v or %v for preparing backing image",
					volume, lhv1.DataSourceTypeExportParameterExportType, lhv1.DataSourceTypeExportParameterVolumeName)
			}
		default:
			return fmt.Errorf("volume %s backing image type %v is not supported via CSI", volume, sourceType)
		}
		bi := &longhornclient.BackingImage{
			Name: image, ExpectedChecksum: checksum, SourceType: sourceType, Parameters: sourceParams, DataEngine: dataEngine,
		}
		if s, ok := params[lhv1.BackingImageParameterMinNumberOfCopies]; ok {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return fmt.Errorf("invalid parameter minNumberOfCopies of backing image: %v", err)
			}
			bi.MinNumberOfCopies = int64(n)
		}
		if s, ok := params[lhv1.BackingImageParameterNodeSelector]; ok {
			bi.NodeSelector = strings.Split(s, ",")
		}
		if s, ok := params[lhv1.BackingImageParameterDiskSelector]; ok {
			bi.DiskSelector = strings.Split(s, ",")
		}
		_, err := c.BackingImage.Create(bi)
		return err
	}
	if (sourceType != "" && sourceType != existing.SourceType) || (len(sourceParams) != 0 && !reflect.DeepEqual(existing.Parameters, sourceParams)) {
		return fmt.Errorf("existing backing image %v data source is different from the parameters in the creation request or StorageClass", image)
	}
	if checksum != "" && ((existing.CurrentChecksum != "" && existing.CurrentChecksum != checksum) ||
		(existing.ExpectedChecksum != "" && existing.ExpectedChecksum != checksum)) {
		return fmt.Errorf("existing backing image %v expected checksum or current checksum doesn't match the specified checksum %v in the request", image, checksum)
	}
	return nil
}
