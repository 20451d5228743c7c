package longhornmanager

import (
	"github.com/longhorn/longhorn-manager/controller"
	lhutil "github.com/longhorn/longhorn-manager/util"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/longhorn/diskschedule/test/infrastructure/longhornpod"
)

// addBackingImageControllers builds Longhorn's backing image, backing
// image manager and backing image data source controllers, as
// longhorn-manager's controller manager does, with the default
// backing-image manager image: they create a backing-image manager pod per
// disk and a data source pod per image being prepared, which the sandbox's
// kubelet runs and test/infrastructure/dataplane's PodServices serves.
func addBackingImageControllers(log logrus.FieldLogger, pod *longhornpod.Pod, scheme *runtime.Scheme, namespace, node string, opts Options, proxyConns lhutil.Counter, add func(string, runner, error) error) error {
	ds, kube := pod.DataStore, pod.Kube
	bi, err := controller.NewBackingImageController(log, ds, scheme, kube, namespace, node, ServiceAccount, opts.BackingImageManagerImage, proxyConns)
	if err := add("backing image", bi, err); err != nil {
		return err
	}
	bim, err := controller.NewBackingImageManagerController(log, ds, scheme, kube, namespace, node, ServiceAccount, opts.BackingImageManagerImage)
	if err := add("backing image manager", bim, err); err != nil {
		return err
	}
	bids, err := controller.NewBackingImageDataSourceController(log, ds, scheme, kube, namespace, node, ServiceAccount, opts.BackingImageManagerImage, proxyConns)
	return add("backing image data source", bids, err)
}
