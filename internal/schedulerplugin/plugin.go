package schedulerplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/longhorn/diskschedule/internal/extender"
	"github.com/longhorn/diskschedule/internal/extender/packing"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/scheme"
	"github.com/longhorn/diskschedule/internal/settings"
)

// Name is the plugin's name in a KubeSchedulerConfiguration profile.
const Name = "diskschedule"

// DefaultNamespace is Longhorn's namespace, where the ledgers live, when
// the plugin's arguments name none.
const DefaultNamespace = "longhorn-system"

// DefaultDecisionTimeout bounds PreBind's wait for the ledger's decision
// when the plugin's arguments set none: kube-scheduler's extender
// httpTimeout in config/scheduler.
const DefaultDecisionTimeout = 10 * time.Second

// Args are the plugin's arguments (pluginConfig args in the profile).
type Args struct {
	// Namespace is Longhorn's namespace; DefaultNamespace when empty.
	Namespace string `json:"namespace,omitempty"`
	// DecisionTimeout bounds PreBind's wait for the ledger's decision, a
	// Go duration; DefaultDecisionTimeout when empty.
	DecisionTimeout string `json:"decisionTimeout,omitempty"`
}

// Options configure a Plugin.
type Options struct {
	// Namespace is Longhorn's namespace.
	Namespace string
	// DecisionTimeout bounds PreBind's wait for the ledger's decision.
	DecisionTimeout time.Duration
	// Registerer takes the extender's metrics; a registry of the plugin's
	// own when nil.
	Registerer prometheus.Registerer
}

// Plugin is the diskschedule plugin: the extender's decisions at the
// scheduling framework's extension points.
type Plugin struct {
	ext     *extender.Extender
	timeout time.Duration
}

var (
	_ fwk.PreFilterPlugin   = (*Plugin)(nil)
	_ fwk.FilterPlugin      = (*Plugin)(nil)
	_ fwk.PreScorePlugin    = (*Plugin)(nil)
	_ fwk.ScorePlugin       = (*Plugin)(nil)
	_ fwk.ReservePlugin     = (*Plugin)(nil)
	_ fwk.PreBindPlugin     = (*Plugin)(nil)
	_ fwk.EnqueueExtensions = (*Plugin)(nil)
)

// Factory is the plugin's factory for kube-scheduler's registry
// (app.WithPlugin): it reads the plugin's Args and starts the plugin with
// kube-scheduler's own connection to the API server, its metrics in
// kube-scheduler's own registry, which its /metrics serves.
func Factory(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	opts := Options{Namespace: args.Namespace, Registerer: legacyregistry.Registerer()}
	if args.DecisionTimeout != "" {
		if opts.DecisionTimeout, err = time.ParseDuration(args.DecisionTimeout); err != nil {
			return nil, fmt.Errorf("parsing the %s plugin's decisionTimeout: %w", Name, err)
		}
	}
	return New(ctx, h.KubeConfig(), opts)
}

// decodeArgs reads the plugin's arguments, which kube-scheduler hands an
// out-of-tree plugin undecoded.
func decodeArgs(obj runtime.Object) (Args, error) {
	var args Args
	u, ok := obj.(*runtime.Unknown)
	if !ok || len(u.Raw) == 0 {
		return args, nil
	}
	if err := json.Unmarshal(u.Raw, &args); err != nil {
		return args, fmt.Errorf("decoding the %s plugin's arguments: %w", Name, err)
	}
	return args, nil
}

// New starts the plugin's cache on cfg and the extender over it, and
// returns once both have seen every object they follow; they run until
// ctx ends.
func New(ctx context.Context, cfg *rest.Config, opts Options) (*Plugin, error) {
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.DecisionTimeout <= 0 {
		opts.DecisionTimeout = DefaultDecisionTimeout
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	logger := log.FromContext(ctx).WithName(Name)
	ctx = log.IntoContext(ctx, logger)
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	c, err := cache.New(cfg, cacheOptions(s, opts.Namespace))
	if err != nil {
		return nil, fmt.Errorf("creating the %s plugin's cache: %w", Name, err)
	}
	// The extender looks replicas up by volume; indexing another kind
	// would make the cache follow it, beyond what the plugin may read.
	if err := index.RegisterFor(ctx, c, &lhv1.Replica{}); err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: s, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		return nil, fmt.Errorf("creating the %s plugin's client: %w", Name, err)
	}
	go func() {
		if err := c.Start(ctx); err != nil {
			logger.Error(err, "Running the plugin's cache")
		}
	}()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("waiting for the %s plugin's cache: %w", Name, ctx.Err())
	}
	ext := extender.New(extender.Options{
		Client: cl, APIReader: cl, Informers: c, Namespace: opts.Namespace,
		Config:  newConfigStore(cl, types.NamespacedName{Namespace: opts.Namespace, Name: settings.ConfigMapName}),
		Clock:   clock.RealClock{},
		Metrics: metrics.NewExtender(opts.Registerer),
		Budget:  packing.DefaultBudget,
	})
	if err := ext.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting the %s plugin: %w", Name, err)
	}
	logger.Info("Following the ledgers", "namespace", opts.Namespace, "decisionTimeout", opts.DecisionTimeout)
	return &Plugin{ext: ext, timeout: opts.DecisionTimeout}, nil
}

// cacheOptions restrict the plugin's cache to what the extender reads:
// Longhorn's objects and the ledgers in Longhorn's namespace, of its
// ConfigMaps only the extender's, pods and claims in every namespace.
// Nothing reads managed fields.
func cacheOptions(s *runtime.Scheme, namespace string) cache.Options {
	return cache.Options{
		Scheme:            s,
		DefaultTransform:  cache.TransformStripManagedFields(),
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                   {Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}},
			&corev1.PersistentVolumeClaim{}: {Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}},
			&corev1.ConfigMap{}:             {Namespaces: map[string]cache.Config{namespace: {}}, Field: fields.OneTermEqualSelector("metadata.name", settings.ConfigMapName)},
		},
	}
}

// Name returns the plugin's name.
func (p *Plugin) Name() string { return Name }

// stateKey is where a cycle's decision is kept in the cycle state.
const stateKey fwk.StateKey = Name

// cycleState is the plugin's part of a scheduling cycle's state.
type cycleState struct {
	cycle *extender.Cycle
	// scores are PreScore's scores of the nodes that passed, 0–10.
	scores map[string]int64
}

// Clone returns s: nothing changes a cycle's decision once made, and
// PreScore writes the scores before any copy is taken.
func (s *cycleState) Clone() fwk.StateData { return s }

// read returns the cycle's decision, or nil when PreFilter skipped the pod.
func read(state fwk.CycleState) *cycleState {
	data, err := state.Read(stateKey)
	if err != nil {
		return nil
	}
	s, _ := data.(*cycleState)
	return s
}

// PreFilter evaluates the nodes the pod may go to as far as each node
// itself says (mayHost) for the pod's volumes (Extender.Evaluate), and
// keeps the verdicts for Filter; the others are left to kube-scheduler's
// own filters, which refuse them. A pod whose volumes need no space on its
// node is skipped; a restarted pod goes only to the node that holds a
// replica of each of its volumes, when it may go there.
func (p *Plugin) PreFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	logger := log.FromContext(ctx)
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if node := n.Node(); node != nil && mayHost(logger, pod, node) {
			names = append(names, node.Name)
		}
	}
	c, err := p.ext.Evaluate(ctx, pod, names)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if c == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	state.Write(stateKey, &cycleState{cycle: c})
	if only := c.Nodes(); only != nil {
		return &fwk.PreFilterResult{NodeNames: sets.New(only...)}, nil
	}
	return nil, nil
}

// PreFilterExtensions returns nil: the pods on a node do not change where
// the pod's volumes fit, the ledgers do.
func (p *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter passes the nodes PreFilter found able to hold the pod's volumes;
// the others are unschedulable, with the reason in numbers.
func (p *Plugin) Filter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s := read(state)
	if s == nil {
		return fwk.AsStatus(fmt.Errorf("no %s decision in the cycle state of pod %s", Name, client.ObjectKeyFromObject(pod)))
	}
	if ok, why := s.cycle.Fits(nodeInfo.Node().Name); !ok {
		return fwk.NewStatus(fwk.Unschedulable, why)
	}
	return nil
}

// PreScore scores the nodes that passed as the extender's prioritize
// does (Cycle.Scores).
func (p *Plugin) PreScore(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	s := read(state)
	if s == nil {
		return fwk.NewStatus(fwk.Skip)
	}
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Node().Name)
	}
	s.scores = s.cycle.Scores(names)
	return nil
}

// Score returns PreScore's score of the node on kube-scheduler's scale:
// the extender's 0–10, times ten.
func (p *Plugin) Score(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s := read(state)
	if s == nil || s.scores == nil {
		return 0, nil
	}
	return s.scores[nodeInfo.Node().Name] * (fwk.MaxNodeScore / extenderv1.MaxExtenderPriority), nil
}

// ScoreExtensions returns nil: scores are on kube-scheduler's scale already.
func (p *Plugin) ScoreExtensions() fwk.ScoreExtensions { return nil }

// Reserve holds the space of the pod's volumes on node in memory for the
// rest of the cycle and the binding (Extender.Hold): the cycles of the
// next pods count it. A node that no longer fits is unschedulable.
func (p *Plugin) Reserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, node string) *fwk.Status {
	s := read(state)
	if s == nil {
		return nil
	}
	if err := p.ext.Hold(s.cycle, node); err != nil {
		return statusOf(err)
	}
	return nil
}

// Unreserve gives back the space Reserve held: the pod is not going to
// node. A reservation PreBind wrote already expires in the ledger (DESIGN
// rule 6: its pod is not bound).
func (p *Plugin) Unreserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, node string) {
	if read(state) != nil {
		p.ext.Release(pod.UID)
	}
}

// PreBindPreFlight skips PreBind for a pod with nothing to reserve.
func (p *Plugin) PreBindPreFlight(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, node string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	s := read(state)
	if s == nil || s.cycle.Nodes() != nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// PreBind writes the pod's reservations into node's ledgers as the
// extender's /bind does (Extender.Reserve) and waits for the ledger to
// decide them (Extender.AwaitDecisions) before the pod is bound. A
// reservation refused is unschedulable with the ledger's numbers, and the
// pod goes back to the queue.
func (p *Plugin) PreBind(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, node string) *fwk.Status {
	if read(state) == nil {
		return nil
	}
	held, err := p.ext.Reserve(ctx, client.ObjectKeyFromObject(pod), pod.UID, node)
	if err == nil {
		err = p.ext.AwaitDecisions(ctx, held, p.timeout)
	}
	if err != nil {
		log.FromContext(ctx).Info("Reserving a pod's space refused", "pod", client.ObjectKeyFromObject(pod), "node", node, "reason", err.Error())
		return statusOf(err)
	}
	return nil
}

// EventsToRegister names the changes that may make a pod this plugin
// rejected fit: a ledger's (its decisions, a reservation ending), a
// node's, a claim's or volume's, and a pod's deletion.
func (p *Plugin) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: ledgerResource, ActionType: fwk.All}},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint | fwk.UpdateNodeCondition}},
		{Event: fwk.ClusterEvent{Resource: fwk.PersistentVolumeClaim, ActionType: fwk.Add | fwk.Update}},
		{Event: fwk.ClusterEvent{Resource: fwk.PersistentVolume, ActionType: fwk.Add | fwk.Update}},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}},
	}, nil
}

// ledgerResource is the DiskSchedule kind as kube-scheduler names a
// resource it follows with a dynamic informer
// (<resource>.<version>.<group>; TestLedgerResource holds it to the API).
const ledgerResource fwk.EventResource = "diskschedules.v1beta2.longhorn.io"

// statusOf is the framework's status of err: unschedulable, with the
// numbers, when a ledger refused the pod's space; an error otherwise.
func statusOf(err error) *fwk.Status {
	if errors.Is(err, extender.ErrRefused) {
		return fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	return fwk.AsStatus(err)
}
