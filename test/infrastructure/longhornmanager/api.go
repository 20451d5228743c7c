package longhornmanager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/longhorn/longhorn-manager/api"
	"github.com/longhorn/longhorn-manager/controller"
	"github.com/longhorn/longhorn-manager/manager"
	lhtypes "github.com/longhorn/longhorn-manager/types"
	lhutil "github.com/longhorn/longhorn-manager/util"
	"github.com/sirupsen/logrus"

	"github.com/longhorn/diskschedule/test/infrastructure/longhornpod"
)

// APIPort is the port longhorn-manager serves Longhorn's REST API on, which
// the longhorn-backend Service and Longhorn's CSI driver reach.
const APIPort = lhtypes.DefaultAPIPort

// ServeAPI serves Longhorn's REST API (its api package's router over
// manager.VolumeManager, as longhorn-manager's daemon serves it) on ip at
// APIPort, over pod's datastore, until ctx ends. It returns once it
// listens.
func ServeAPI(ctx context.Context, pod *longhornpod.Pod, ip string, log logrus.FieldLogger) error {
	wsc, err := controller.NewWebsocketController(log, pod.DataStore)
	if err != nil {
		return fmt.Errorf("Longhorn's API: websocket controller: %w", err)
	}
	m := manager.NewVolumeManager(pod.Node, pod.DataStore, lhutil.NewAtomicCounter(), controller.NewSnapshotConcurrentLimiter())
	l, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(APIPort)))
	if err != nil {
		return fmt.Errorf("Longhorn's API: %w", err)
	}
	srv := &http.Server{Handler: api.NewRouter(api.NewServer(m, wsc)), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.WithError(err).Error("Longhorn's API stopped")
		}
	}()
	return nil
}
