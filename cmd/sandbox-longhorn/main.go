// Command sandbox-longhorn runs longhorn-manager v1.12.0's own control plane
// for the sandbox (test/infrastructure/longhornmanager): Longhorn's admission webhooks,
// registered with the API server, and one longhorn-manager per node, each
// with its own datastore and controller ID, running Longhorn's volume,
// replica and engine controllers (with --nodes-only only its node, instance
// manager and Kubernetes node controllers), until it is signalled. With
// --control-socket it also takes a node down on the sandbox's request
// (control.go); with --csi-socket it serves Longhorn's own CSI Identity and
// Controller services there, which the sandbox's CSI sidecars call. The
// sandbox starts it as a process of its own: Longhorn's controller package and the CSI
// external-provisioner the sandbox's simulated driver is built on register
// the same Kubernetes feature gates differently, so they cannot share one
// process (as in a cluster, where they never do).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	lhtypes "github.com/longhorn/longhorn-manager/types"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/test/infrastructure/dataplane"
	"github.com/longhorn/diskschedule/test/infrastructure/longhornmanager"
	"github.com/longhorn/diskschedule/test/infrastructure/longhornpod"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-longhorn:", err)
		os.Exit(1)
	}
}

func run() error {
	kubeconfig := flag.String("kubeconfig", "", "An administrator's kubeconfig of the sandbox's API server.")
	namespace := flag.String("namespace", "longhorn-system", "Longhorn's namespace.")
	nodes := flag.String("nodes", "", "The nodes, comma-separated: one longhorn-manager runs for each.")
	managerImage := flag.String("manager-image", "longhornio/longhorn-manager:v1.12.0", "longhorn-manager's own image.")
	engineImage := flag.String("engine-image", "longhornio/longhorn-engine:v1.12.0", "The default engine image.")
	imImage := flag.String("instance-manager-image", "longhornio/longhorn-instance-manager:v1.12.0", "The default instance manager image.")
	bimImage := flag.String("backing-image-manager-image", "longhornio/backing-image-manager:v1.12.0", "The default backing-image manager image.")
	smImage := flag.String("share-manager-image", "longhornio/longhorn-share-manager:v1.12.0", "The share manager image, which Longhorn's volume controller gives the share managers of RWX volumes.")
	supportBundleImage := flag.String("support-bundle-manager-image", "longhornio/support-bundle-kit:v0.0.79", "The support bundle manager image.")
	usableFile := flag.String("usable-file", "", "Written once Longhorn's webhooks see the default engine image deployed, so that volumes can be created.")
	readyFile := flag.String("ready-file", "", "Written, with the controllers' names, once the webhooks are registered and every controller started.")
	dataPlaneFile := flag.String("data-plane", "", "A JSON file of the simulated data plane (test/infrastructure/dataplane.Plan): each node's instance manager address and disks. When set, the disks are mounted in the process's own mount namespace, each node's instance manager serves (and the backing-image and share manager pods Longhorn creates), and Longhorn's node, instance manager, attachment, backing image, share manager and Kubernetes controllers run too.")
	controlSocket := flag.String("control-socket", "", "A Unix socket where the sandbox asks for a node to go down (POST /nodes/{name}/stop): its instance manager and its longhorn-manager stop.")
	csiSocket := flag.String("csi-socket", "", "With --data-plane and without --nodes-only, a Unix socket where Longhorn's own CSI Identity and Controller services serve (longhornmanager.ServeCSI), as longhorn-csi-plugin serves them to the CSI sidecars.")
	nodesOnly := flag.Bool("nodes-only", false, "With --data-plane, run only Longhorn's node, instance manager and Kubernetes node controllers (longhornmanager.NodeControllers): Longhorn Nodes, their disks' status and the instance managers are Longhorn's, and nothing of Longhorn's creates, places or runs volumes and replicas; no REST API, no attacher.")
	flag.Parse()
	if *kubeconfig == "" || *nodes == "" {
		return errors.New("--kubeconfig and --nodes are required")
	}
	if *nodesOnly && *dataPlaneFile == "" {
		return errors.New("--nodes-only needs --data-plane")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %s: %w", *kubeconfig, err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := logrus.StandardLogger()
	running := newNodes(log)
	var dp *dataplane.Plan
	var ims dataplane.NodeInstanceManagers
	if *dataPlaneFile != "" {
		var disks *longhornmanager.Disks
		if dp, ims, disks, err = startDataPlane(ctx, *dataPlaneFile, running, log); err != nil {
			return err
		}
		// Last, once every longhorn-manager is told to stop.
		defer func() {
			if err := disks.Unmount(); err != nil {
				log.WithError(err).Warn("Failed to unmount the disks; they go with the process's mount namespace")
			}
		}()
	}
	names := strings.Split(*nodes, ",")
	// longhorn-manager's pod spec gives it its node and namespace in its
	// environment; its validating webhook reads them.
	for k, v := range map[string]string{lhtypes.EnvNodeName: names[0], lhtypes.EnvPodNamespace: *namespace} {
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("setting %s: %w", k, err)
		}
	}
	// The first node's longhorn-manager serves the webhooks and does the
	// daemon's start-up writes.
	pod, err := longhornpod.New(cfg, *namespace, names[0], lhtypes.KubeAPIQPS, lhtypes.KubeAPIBurst)
	if err != nil {
		return err
	}
	if err := pod.Start(ctx); err != nil {
		return err
	}
	webhooks, err := longhornmanager.StartWebhooks(ctx, pod)
	if err != nil {
		return err
	}
	if err := webhooks.Register(ctx, c); err != nil {
		return err
	}
	log.Infof("Serving Longhorn's admission webhooks at %s", webhooks.URL())
	if err := longhornmanager.Initialize(ctx, pod, *namespace, *kubeconfig, longhornmanager.Images{
		Manager: *managerImage, Engine: *engineImage, InstanceManager: *imImage, BackingImageManager: *bimImage, SupportBundleManager: *supportBundleImage,
	}); err != nil {
		return err
	}
	controllers := longhornmanager.Controllers
	opts := longhornmanager.Options{DataPlane: dp != nil, NodesOnly: *nodesOnly, InstanceManagerImage: *imImage, BackingImageManagerImage: *bimImage, ShareManagerImage: *smImage}
	switch {
	case *nodesOnly:
		controllers = longhornmanager.NodeControllers
	case dp != nil:
		controllers = append(slices.Clone(controllers), longhornmanager.DataPlaneControllers...)
		// The backing-image manager, data source and share manager pods
		// Longhorn creates serve at their own IPs; a share manager finds
		// its volume's device on its node's instance manager.
		go func() {
			if err := dataplane.NewPodServices(pod.Kube, *namespace, dp, ims, running.network, log).Run(ctx); err != nil {
				log.WithError(err).Error("The services of Longhorn's pods stopped")
			}
		}()
	}
	if dp != nil {
		// Longhorn's node controller finds its node's longhorn-manager pod.
		for _, n := range names {
			if err := longhornmanager.CreateManagerPod(ctx, pod.Kube, *namespace, n, *managerImage, dp.DiskRoot); err != nil {
				return err
			}
		}
	}
	for _, n := range names {
		// Each longhorn-manager runs until the process ends or its node
		// goes down.
		managerCtx, stopManager := context.WithCancel(ctx)
		defer stopManager()
		if _, err := longhornmanager.Start(managerCtx, cfg, *namespace, n, log, opts); err != nil {
			return err
		}
		running.get(n).stopManager = stopManager
		log.Infof("Started longhorn-manager of node %s: %s", n, strings.Join(controllers, ", "))
	}
	if *controlSocket != "" {
		if err := serveControl(ctx, *controlSocket, running); err != nil {
			return err
		}
		log.Infof("Taking nodes down on request at %s", *controlSocket)
	}
	if dp != nil && !*nodesOnly {
		attacher, err := longhornmanager.NewAttacher(pod, log)
		if err != nil {
			return err
		}
		go attacher.Run(ctx)
		controllers = append(controllers, "csi-attacher")
		// The first node's longhorn-manager serves Longhorn's REST API
		// (the longhorn-backend Service's endpoint), which Longhorn's CSI
		// driver calls.
		if err := longhornmanager.ServeAPI(ctx, pod, dp.Nodes[0].IP, log); err != nil {
			return err
		}
		log.Infof("Serving Longhorn's API at %s", dp.APIURL())
		if *csiSocket != "" {
			// longhorn-csi-plugin's controller server, on the first node,
			// calling the API above.
			if err := longhornmanager.ServeCSI(ctx, cfg, pod.Kube, *namespace, names[0], dp.APIURL(), *csiSocket, log); err != nil {
				return err
			}
			log.Infof("Serving Longhorn's CSI controller server at %s", *csiSocket)
		}
	}
	if *readyFile != "" {
		line := fmt.Sprintf("Longhorn's admission webhooks, and on each of %d nodes a longhorn-manager running %s\n", len(names), strings.Join(controllers, ", "))
		if err := os.WriteFile(*readyFile, []byte(line), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", *readyFile, err)
		}
	}
	if *usableFile != "" {
		if err := longhornmanager.WaitEngineImage(ctx, pod, *engineImage); err != nil {
			return err
		}
		if err := os.WriteFile(*usableFile, []byte(*engineImage+" deployed\n"), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", *usableFile, err)
		}
	}
	<-ctx.Done()
	return nil
}

// startDataPlane mounts the data plane's disks, makes longhorn-manager's host
// operations run here, and serves each node's instance manager, all on one
// dataplane.Network, until ctx ends or the node goes down (running). Each
// disk's filesystem reports as used what the network holds on it. It
// returns the plan, the instance managers by node and the disks, which the
// caller unmounts.
func startDataPlane(ctx context.Context, file string, running *nodes, log logrus.FieldLogger) (*dataplane.Plan, dataplane.NodeInstanceManagers, *longhornmanager.Disks, error) {
	dp, err := dataplane.ReadPlan(file)
	if err != nil {
		return nil, nil, nil, err
	}
	network := dataplane.NewNetwork()
	for _, d := range dp.Disks() {
		network.AddDisk(d.Path, d.Size)
	}
	network.SetRebuildRate(dp.RebuildRate)
	running.network = network
	disks, err := longhornmanager.MountDisks(dp.DiskRoot, dp.Disks(), network.DiskHeld)
	if err != nil {
		return nil, nil, nil, err
	}
	longhornmanager.RunOnThisHost()
	ims := dataplane.NodeInstanceManagers{}
	for _, n := range dp.Nodes {
		im := network.InstanceManager(n.IP)
		ls, err := im.Listen()
		if err != nil {
			return nil, nil, nil, errors.Join(fmt.Errorf("node %s: %w", n.Name, err), disks.Unmount())
		}
		ims[n.Name] = im
		running.get(n.Name).instanceManager = ls
		go func() {
			if err := ls.Serve(ctx); err != nil {
				log.WithError(err).Errorf("The instance manager of node %s stopped", n.Name)
			}
		}()
		log.Infof("Serving node %s's instance manager at %s, with %d disks", n.Name, n.IP, len(n.Disks))
	}
	return dp, ims, disks, nil
}
