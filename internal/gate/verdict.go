package gate

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// verdict is the gate's answer to one admission request.
type verdict struct {
	allowed bool
	// message says why, in the ledger's numbers when the ledger refused.
	message string
	// warning is returned to the writer beside an admission.
	warning string
	// result labels the decision in metrics: admitted, denied, undecided,
	// error or malformed.
	result string
	// code is the HTTP status of a refusal (403 denied, 400 malformed, 500
	// error, 504 undecided).
	code int32
}

func allow(reason string) verdict {
	return verdict{allowed: true, message: reason, result: "admitted"}
}

func allowWithWarning(reason, warning string) verdict {
	return verdict{allowed: true, message: reason, warning: warning, result: "admitted"}
}

func deny(msg string) verdict {
	return verdict{message: msg, result: "denied", code: http.StatusForbidden}
}

// undecided denies a write whose decision did not come in time; Longhorn
// retries it, and finds it granted at once if the ledger granted it since.
func undecided(what string, err error) verdict {
	if errors.Is(err, context.DeadlineExceeded) {
		return verdict{message: what + ": the ledger gave no decision in time; retry", result: "undecided", code: http.StatusGatewayTimeout}
	}
	if errors.Is(err, errNoLedger) {
		return deny(what + ": the disk's DiskSchedule is gone")
	}
	return failed(fmt.Errorf("%s: %w", what, err))
}

func failed(err error) verdict {
	return verdict{message: err.Error(), result: "error", code: http.StatusInternalServerError}
}

func malformed(err error) verdict {
	return verdict{message: fmt.Sprintf("malformed admission request: %v", err), result: "malformed", code: http.StatusBadRequest}
}

// response turns v into the AdmissionReview response.
func (v verdict) response() admission.Response {
	if v.allowed {
		resp := admission.Allowed(v.message)
		if v.warning != "" {
			resp = resp.WithWarnings(v.warning)
		}
		return resp
	}
	if v.result == "denied" {
		return admission.Denied("diskschedule-gate: " + v.message)
	}
	return admission.Errored(v.code, errors.New("diskschedule-gate: "+v.message))
}

// admissionRequest is one admission request with the decoder of the
// manager's scheme.
type admissionRequest struct {
	admission.Request
	decoder admission.Decoder
}

// decode decodes one of the request's objects into obj.
func (r admissionRequest) decode(raw []byte, obj runtime.Object) error {
	if len(raw) == 0 {
		return errors.New("the request carries no object")
	}
	return r.decoder.DecodeRaw(runtime.RawExtension{Raw: raw}, obj)
}

// dryRun reports whether the request must write nothing.
func (r admissionRequest) dryRun() bool {
	return r.DryRun != nil && *r.DryRun
}

// isUpdate reports whether the request updates an existing object.
func (r admissionRequest) isUpdate() bool {
	return r.Operation == admissionv1.Update
}
