package dataplane_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/longhorn/longhorn-manager/engineapi"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	"github.com/longhorn/diskschedule/test/infrastructure/dataplane"
)

// serveOnLoopback serves, until the test ends, what serve serves on port of
// a free loopback address, and returns the address's IP.
func serveOnLoopback(t *testing.T, port int, serve func(context.Context, net.Listener) error) string {
	t.Helper()
	for range 20 {
		ip := fmt.Sprintf("127.%d.%d.%d", 100+rand.IntN(100), rand.IntN(256), 1+rand.IntN(254))
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- serve(ctx, l) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
		return ip
	}
	t.Fatal("no free loopback address")
	return ""
}

// runningManager is the BackingImageManager object Longhorn's controller
// writes once the manager's pod of ip runs and it read its API version.
func runningManager(ip string) *lhv1.BackingImageManager {
	return &lhv1.BackingImageManager{Status: lhv1.BackingImageManagerStatus{
		CurrentState: lhv1.BackingImageManagerStateRunning, IP: ip,
		APIVersion: engineapi.CurrentBackingImageManagerAPIVersion, APIMinVersion: engineapi.MinBackingImageManagerAPIVersion,
	}}
}

// TestLonghornsClientsPrepareABackingImage drives a simulated data source
// and two backing-image managers with longhorn-manager v1.12.0's own
// clients, as its data source and manager controllers do: the download
// is ready for transfer at its declared size, the first manager fetches
// it (the data source then reports it ready), the second syncs it from the
// first, each watch says so, and a file deleted is gone.
func TestLonghornsClientsPrepareABackingImage(t *testing.T) {
	ds := dataplane.NewDataSource(dataplane.DataSourceSpec{
		Name: "image", UUID: "uuid-1", DiskUUID: "disk-1", SourceType: string(lhv1.BackingImageDataSourceTypeDownload),
		Parameters: map[string]string{lhv1.DataSourceTypeDownloadParameterURL: "http://x.invalid/i", dataplane.SourceParamSize: "10Gi", dataplane.SourceParamRealSize: "4Gi"},
	})
	dsIP := serveOnLoopback(t, engineapi.BackingImageDataSourceDefaultPort, ds.Serve)
	dsClient := engineapi.NewBackingImageDataSourceClient(dsIP)
	info, err := dsClient.Get()
	if err != nil {
		t.Fatal(err)
	}
	if info.State != string(lhv1.BackingImageStateReadyForTransfer) || info.Size != 10<<30 {
		t.Fatalf("data source: %+v, want ready-for-transfer at 10Gi", info)
	}

	ips := make([]string, 2)
	clients := make([]*engineapi.BackingImageManagerClient, 2)
	for i := range ips {
		ips[i] = serveOnLoopback(t, engineapi.BackingImageManagerDefaultPort, dataplane.NewBackingImageManager().Serve)
		c, err := engineapi.NewBackingImageManagerClient(runningManager(ips[i]))
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
		minV, v, err := c.VersionGet()
		if err != nil || minV != engineapi.MinBackingImageManagerAPIVersion || v != engineapi.CurrentBackingImageManagerAPIVersion {
			t.Fatalf("VersionGet: %d-%d, %v", minV, v, err)
		}
	}
	watch, err := clients[0].Watch()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = watch.Close() }()

	f, err := clients[0].Fetch("image", "uuid-1", info.CurrentChecksum, net.JoinHostPort(dsIP, strconv.Itoa(engineapi.BackingImageDataSourceDefaultPort)), info.Size)
	if err != nil {
		t.Fatal(err)
	}
	if f.State != lhv1.BackingImageStateReady || f.Size != 10<<30 || f.RealSize != 4<<30 || f.VirtualSize != 10<<30 || f.CurrentChecksum != info.CurrentChecksum {
		t.Fatalf("fetched: %+v", f)
	}
	if err := watch.Recv(); err != nil {
		t.Fatalf("watch after the fetch: %v", err)
	}
	if info, err = dsClient.Get(); err != nil || info.State != string(lhv1.BackingImageStateReady) {
		t.Fatalf("data source after the transfer: %+v, %v", info, err)
	}
	if _, err := clients[0].Fetch("image", "uuid-1", "", net.JoinHostPort(dsIP, strconv.Itoa(engineapi.BackingImageDataSourceDefaultPort)), info.Size); err == nil {
		t.Error("a second fetch of the same file succeeded")
	}

	synced, err := clients[1].Sync("image", "uuid-1", f.CurrentChecksum, ips[0], f.Size)
	if err != nil {
		t.Fatal(err)
	}
	if synced.State != lhv1.BackingImageStateReady || synced.RealSize != 4<<30 {
		t.Fatalf("synced: %+v", synced)
	}
	list, err := clients[1].List()
	if err != nil || len(list) != 1 || list["image"].State != lhv1.BackingImageStateReady {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if _, _, err := clients[1].PrepareDownload("image", "uuid-1"); err == nil {
		t.Error("PrepareDownload succeeded")
	}
	if err := clients[1].Delete("image", "uuid-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := clients[1].Get("image", "uuid-1"); err == nil {
		t.Error("the deleted file is still there")
	}
}

// TestBackingImageCopiesTakeSpace: a backing-image manager of a disk
// holds each file's bytes (its real size) on that disk, as
// backing-image-manager writes them there: fetched onto a disk with room,
// the file is ready and the disk holds its 4Gi; synced onto a disk with
// 3Gi, the copy fails for space, saying so, and the disk holds nothing of
// it; deleted, the file's bytes leave its disk.
func TestBackingImageCopiesTakeSpace(t *testing.T) {
	n := dataplane.NewNetwork()
	root := t.TempDir()
	roomy, small := filepath.Join(root, "roomy"), filepath.Join(root, "small")
	n.AddDisk(roomy, 10<<30)
	n.AddDisk(small, 3<<30)
	ds := dataplane.NewDataSource(dataplane.DataSourceSpec{
		Name: "image", UUID: "uuid-1", DiskUUID: "disk-1", SourceType: string(lhv1.BackingImageDataSourceTypeDownload),
		Parameters: map[string]string{lhv1.DataSourceTypeDownloadParameterURL: "http://x.invalid/i", dataplane.SourceParamSize: "10Gi", dataplane.SourceParamRealSize: "4Gi"},
	})
	dsIP := serveOnLoopback(t, engineapi.BackingImageDataSourceDefaultPort, ds.Serve)
	info, err := engineapi.NewBackingImageDataSourceClient(dsIP).Get()
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	var clients []*engineapi.BackingImageManagerClient
	for _, disk := range []string{roomy, small} {
		ip := serveOnLoopback(t, engineapi.BackingImageManagerDefaultPort, dataplane.NewDiskBackingImageManager(disk, n).Serve)
		c, err := engineapi.NewBackingImageManagerClient(runningManager(ip))
		if err != nil {
			t.Fatal(err)
		}
		ips, clients = append(ips, ip), append(clients, c)
	}
	f, err := clients[0].Fetch("image", "uuid-1", info.CurrentChecksum, net.JoinHostPort(dsIP, strconv.Itoa(engineapi.BackingImageDataSourceDefaultPort)), info.Size)
	if err != nil || f.State != lhv1.BackingImageStateReady {
		t.Fatalf("fetching onto the roomy disk: %+v, %v; want ready", f, err)
	}
	if got := n.DiskHeld(roomy); got != 4<<30 {
		t.Fatalf("the roomy disk holds %d bytes after the fetch, want the file's real size, 4Gi", got)
	}
	synced, err := clients[1].Sync("image", "uuid-1", f.CurrentChecksum, ips[0], f.Size)
	if err != nil {
		t.Fatal(err)
	}
	if synced.State != lhv1.BackingImageStateFailed || !strings.Contains(synced.Message, "no space left on device") {
		t.Fatalf("synced onto a 3Gi disk: %+v; want failed for space", synced)
	}
	if got := n.DiskHeld(small); got != 0 {
		t.Fatalf("the small disk holds %d bytes of a copy that failed, want 0", got)
	}
	if err := clients[0].Delete("image", "uuid-1"); err != nil {
		t.Fatal(err)
	}
	if got := n.DiskHeld(roomy); got != 0 {
		t.Fatalf("the roomy disk holds %d bytes after the file was deleted, want 0", got)
	}
}
