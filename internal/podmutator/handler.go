package podmutator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/longhorn/diskschedule/internal/metrics"
)

// Handler answers the admission requests of diskschedule-pods.
type Handler struct {
	cache, api client.Reader
	decoder    admission.Decoder
	secondary  bool
	metrics    *metrics.PodWebhook
	log        logr.Logger
}

// Options configures a Handler.
type Options struct {
	// Cache is read first (the manager's cache); API is read for what the
	// cache does not hold yet: a claim created a moment before its pod, as
	// a StatefulSet's are. Both are required.
	Cache, API client.Reader
	// Decoder decodes pods.
	Decoder admission.Decoder
	// SecondaryScheduler says the second scheduler (diskschedule-scheduler)
	// is deployed: pods that asked for the default scheduler get it.
	SecondaryScheduler bool
	// Metrics records results and latency; nil records nothing.
	Metrics *metrics.PodWebhook
	// Log receives a line per pod left unchanged for want of its claims.
	Log logr.Logger
}

// NewHandler returns the webhook's handler.
func NewHandler(opts Options) (*Handler, error) {
	if opts.Cache == nil || opts.API == nil || opts.Decoder == nil {
		return nil, fmt.Errorf("the pod webhook needs a cache, an API reader and a decoder")
	}
	return &Handler{cache: opts.Cache, api: opts.API, decoder: opts.Decoder, secondary: opts.SecondaryScheduler,
		metrics: opts.Metrics, log: opts.Log}, nil
}

// Handle answers one admission request. It always allows the pod: with a
// JSON patch when the pod opts in, without one otherwise.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp, plan := h.handle(ctx, req)
	elapsed := time.Since(start)
	if h.metrics != nil {
		h.metrics.Decisions.WithLabelValues(string(plan.Result)).Inc()
		h.metrics.Latency.Observe(elapsed.Seconds())
	}
	log := h.log.WithValues("namespace", req.Namespace, "pod", podName(req), "result", plan.Result, "duration", elapsed)
	switch plan.Result {
	case ResultMutated:
		log.V(1).Info("Pod opted in to the scheduler extender", "reason", plan.Reason)
	case ResultUnchanged:
		log.V(1).Info("Pod left unchanged", "reason", plan.Reason)
	default:
		log.Info("Pod left unchanged", "reason", plan.Reason)
	}
	return resp
}

func (h *Handler) handle(ctx context.Context, req admission.Request) (admission.Response, Plan) {
	if req.Operation != admissionv1.Create || req.Kind.Group != "" || req.Kind.Kind != "Pod" {
		plan := Plan{Result: ResultError, Reason: fmt.Sprintf("%s of %s is not a pod's creation", req.Operation, req.Kind.Kind)}
		return admission.Allowed(plan.Reason), plan
	}
	pod := &corev1.Pod{}
	if err := h.decoder.DecodeRaw(req.Object, pod); err != nil {
		plan := Plan{Result: ResultError, Reason: fmt.Sprintf("decoding the pod: %v", err)}
		return admission.Allowed(plan.Reason), plan
	}
	claims, err := h.claims(ctx, req.Namespace, pod)
	if err != nil {
		plan := Plan{Result: ResultError, Reason: err.Error()}
		return admission.Allowed("the pod's claims could not be read"), plan
	}
	plan := Decide(pod, claims, h.secondary)
	if plan.Result != ResultMutated {
		return admission.Allowed(plan.Reason), plan
	}
	mutated := pod.DeepCopy()
	plan.Apply(mutated)
	data, err := json.Marshal(mutated)
	if err != nil {
		plan = Plan{Result: ResultError, Reason: fmt.Sprintf("encoding the pod: %v", err)}
		return admission.Allowed(plan.Reason), plan
	}
	resp := admission.PatchResponseFromRaw(req.Object.Raw, data)
	if resp.Result != nil && resp.Result.Code != http.StatusOK && !resp.Allowed {
		plan = Plan{Result: ResultError, Reason: "computing the patch: " + resp.Result.Message}
		return admission.Allowed(plan.Reason), plan
	}
	return resp, plan
}

// claims looks up what each of the pod's claims is.
func (h *Handler) claims(ctx context.Context, namespace string, pod *corev1.Pod) ([]Claim, error) {
	var out []Claim
	for _, name := range PodClaims(pod) {
		pvc := &corev1.PersistentVolumeClaim{}
		found, err := h.get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pvc)
		if err != nil {
			return nil, fmt.Errorf("reading claim %s/%s: %w", namespace, name, err)
		}
		if !found {
			out = append(out, ClassifyClaim(name, nil, ClassInfo{}, nil))
			continue
		}
		var pv *corev1.PersistentVolume
		if pvc.Spec.VolumeName != "" {
			pv = &corev1.PersistentVolume{}
			ok, err := h.get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv)
			if err != nil {
				return nil, fmt.Errorf("reading PersistentVolume %s of claim %s/%s: %w", pvc.Spec.VolumeName, namespace, name, err)
			}
			if !ok {
				pv = nil
			}
		}
		var class ClassInfo
		if pvc.Spec.StorageClassName != nil && *pvc.Spec.StorageClassName != "" {
			sc := &storagev1.StorageClass{}
			ok, err := h.get(ctx, client.ObjectKey{Name: *pvc.Spec.StorageClassName}, sc)
			if err != nil {
				return nil, fmt.Errorf("reading StorageClass %s of claim %s/%s: %w", *pvc.Spec.StorageClassName, namespace, name, err)
			}
			class = ClassInfo{Found: ok, Provisioner: sc.Provisioner}
		}
		out = append(out, ClassifyClaim(name, pvc, class, pv))
	}
	return out, nil
}

// get reads obj from the cache, and from the API server when the cache
// does not hold it (yet); found is false when neither does.
func (h *Handler) get(ctx context.Context, key client.ObjectKey, obj client.Object) (bool, error) {
	err := h.cache.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		err = h.api.Get(ctx, key, obj)
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// podName names the pod of a request: its name, or its generateName
// prefix while it has none.
func podName(req admission.Request) string {
	if req.Name != "" {
		return req.Name
	}
	var meta struct {
		Metadata struct {
			GenerateName string `json:"generateName"`
		} `json:"metadata"`
	}
	if json.Unmarshal(req.Object.Raw, &meta) == nil && meta.Metadata.GenerateName != "" {
		return meta.Metadata.GenerateName + "*"
	}
	return ""
}
