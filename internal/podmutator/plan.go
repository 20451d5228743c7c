package podmutator

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const (
	// ConfigurationName is the MutatingWebhookConfiguration the webhook serves.
	ConfigurationName = "diskschedule-pods"
	// Path is the webhook's path on the manager's webhook server.
	Path = "/mutate-v1-pod"
	// NamespaceLabel opts a namespace's pods in with the value "enabled";
	// on a pod, the value "disabled" opts that pod out.
	NamespaceLabel = "diskschedule.longhorn.io/extender"
	// SchedulerName is the profile of the second scheduler the chart
	// deploys (scheduler.enabled).
	SchedulerName = "diskschedule-scheduler"
	// ExtendedResource is the resource that sends a pod to the extender.
	ExtendedResource corev1.ResourceName = "longhorn.io/scheduler-extender"
	// CSIDriver is Longhorn's CSI driver and provisioner.
	CSIDriver = "driver.longhorn.io"
)

// ClaimKind says what a pod's claim is, as far as the webhook is concerned.
type ClaimKind int

const (
	// ClaimLonghorn is a claim of a Longhorn StorageClass, or bound to a
	// Longhorn volume.
	ClaimLonghorn ClaimKind = iota
	// ClaimOther is a claim of another driver, or of no class.
	ClaimOther
	// ClaimMissing is a claim that does not exist (yet).
	ClaimMissing
	// ClaimClassMissing is a claim whose StorageClass does not exist.
	ClaimClassMissing
)

// Claim is one of a pod's claims and what it is.
type Claim struct {
	// Name is the claim's name.
	Name string
	// Kind is what the claim is.
	Kind ClaimKind
	// Detail says why, for the log: the class and its provisioner, say.
	Detail string
}

// Result is what the webhook does to a pod.
type Result string

// The webhook's results, the values of its metric's result label.
const (
	// ResultMutated: the pod got the resource, the scheduler name or both.
	ResultMutated Result = "mutated"
	// ResultUnchanged: the pod has a Longhorn claim and already asks for
	// everything.
	ResultUnchanged Result = "unchanged"
	// ResultNotLonghorn: none of the pod's claims is Longhorn's.
	ResultNotLonghorn Result = "not-longhorn"
	// ResultClaimMissing: no claim is Longhorn's, and a claim or its
	// StorageClass does not exist.
	ResultClaimMissing Result = "claim-missing"
	// ResultError: the pod could not be read or its claims looked up.
	ResultError Result = "error"
)

// Plan is the webhook's decision on one pod.
type Plan struct {
	// Result sums the decision up.
	Result Result
	// AddResource adds ExtendedResource to the first container.
	AddResource bool
	// SetScheduler sets spec.schedulerName to SchedulerName.
	SetScheduler bool
	// Reason says why, in words, for the log.
	Reason string
}

// PodClaims returns the names of the claims pod mounts, in order, each once.
func PodClaims(pod *corev1.Pod) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && !seen[v.PersistentVolumeClaim.ClaimName] {
			seen[v.PersistentVolumeClaim.ClaimName] = true
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return out
}

// Decide plans what to do to pod given what its claims are; secondary says
// whether the second scheduler is deployed.
func Decide(pod *corev1.Pod, claims []Claim, secondary bool) Plan {
	var longhorn []string
	var missing, other []string
	for _, c := range claims {
		switch c.Kind {
		case ClaimLonghorn:
			longhorn = append(longhorn, c.Name)
		case ClaimMissing, ClaimClassMissing:
			missing = append(missing, c.Name+": "+c.Detail)
		default:
			other = append(other, c.Name+": "+c.Detail)
		}
	}
	if len(longhorn) == 0 {
		reason := "no claim of Longhorn's"
		if len(claims) == 0 {
			reason = "no claim"
		}
		if len(missing) > 0 {
			reason += "; " + strings.Join(missing, "; ")
		}
		if len(other) > 0 {
			reason += "; " + strings.Join(other, "; ")
		}
		if len(missing) > 0 {
			return Plan{Result: ResultClaimMissing, Reason: reason}
		}
		return Plan{Result: ResultNotLonghorn, Reason: reason}
	}
	p := Plan{
		AddResource:  len(pod.Spec.Containers) > 0 && !asksForExtender(pod),
		SetScheduler: secondary && (pod.Spec.SchedulerName == "" || pod.Spec.SchedulerName == corev1.DefaultSchedulerName),
	}
	var did []string
	if p.AddResource {
		did = append(did, fmt.Sprintf("requests %s in container %s", ExtendedResource, pod.Spec.Containers[0].Name))
	}
	if p.SetScheduler {
		did = append(did, "scheduler "+SchedulerName)
	}
	if len(did) == 0 {
		p.Result = ResultUnchanged
		p.Reason = fmt.Sprintf("Longhorn claims %s; the pod already asks for the extender", strings.Join(longhorn, ", "))
		if secondary && pod.Spec.SchedulerName != SchedulerName {
			p.Reason += " and names scheduler " + pod.Spec.SchedulerName
		}
		return p
	}
	p.Result = ResultMutated
	p.Reason = fmt.Sprintf("Longhorn claims %s: %s", strings.Join(longhorn, ", "), strings.Join(did, ", "))
	return p
}

// asksForExtender reports whether a container of pod requests or limits
// ExtendedResource.
func asksForExtender(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		if _, ok := c.Resources.Requests[ExtendedResource]; ok {
			return true
		}
		if _, ok := c.Resources.Limits[ExtendedResource]; ok {
			return true
		}
	}
	return false
}

// Apply changes pod as p says.
func (p Plan) Apply(pod *corev1.Pod) {
	if p.AddResource && len(pod.Spec.Containers) > 0 {
		c := &pod.Spec.Containers[0]
		one := resource.MustParse("1")
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{}
		}
		c.Resources.Requests[ExtendedResource] = one
		c.Resources.Limits[ExtendedResource] = one
	}
	if p.SetScheduler {
		pod.Spec.SchedulerName = SchedulerName
	}
}

// ClassifyClaim says what a claim is from the claim (nil when it does not
// exist), its StorageClass (nil when it names none or the class does not
// exist) and, for a claim bound to a volume, that PersistentVolume (nil when
// unbound or not found).
func ClassifyClaim(name string, pvc *corev1.PersistentVolumeClaim, class ClassInfo, pv *corev1.PersistentVolume) Claim {
	if pvc == nil {
		return Claim{Name: name, Kind: ClaimMissing, Detail: "the claim does not exist"}
	}
	if pv != nil && pv.Spec.CSI != nil {
		if pv.Spec.CSI.Driver == CSIDriver {
			return Claim{Name: name, Kind: ClaimLonghorn, Detail: "bound to Longhorn volume " + pv.Spec.CSI.VolumeHandle}
		}
		return Claim{Name: name, Kind: ClaimOther, Detail: "bound to a volume of driver " + pv.Spec.CSI.Driver}
	}
	className := ""
	if pvc.Spec.StorageClassName != nil {
		className = *pvc.Spec.StorageClassName
	}
	switch {
	case className == "":
		return Claim{Name: name, Kind: ClaimOther, Detail: "the claim names no StorageClass"}
	case !class.Found:
		return Claim{Name: name, Kind: ClaimClassMissing, Detail: fmt.Sprintf("StorageClass %s does not exist", className)}
	case class.Provisioner == CSIDriver:
		return Claim{Name: name, Kind: ClaimLonghorn, Detail: "StorageClass " + className}
	}
	return Claim{Name: name, Kind: ClaimOther, Detail: fmt.Sprintf("StorageClass %s of provisioner %s", className, class.Provisioner)}
}

// ClassInfo is what the webhook reads of a StorageClass.
type ClassInfo struct {
	// Found is whether the class exists.
	Found bool
	// Provisioner is its provisioner.
	Provisioner string
}
