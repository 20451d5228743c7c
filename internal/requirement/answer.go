package requirement

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Results label an Answer in the gate's metrics.
const (
	// ResultAdmitted: the write is admitted.
	ResultAdmitted = "admitted"
	// ResultDenied: the ledger refused, or cannot be asked.
	ResultDenied = "denied"
	// ResultUndecided: the ledger gave no decision in time.
	ResultUndecided = "undecided"
	// ResultNoLeader: no leader was deciding the ledgers; the write is
	// denied at once so its writer retries.
	ResultNoLeader = "noleader"
	// ResultError: reading or writing a ledger failed.
	ResultError = "error"
	// ResultMalformed: the admission request could not be read.
	ResultMalformed = "malformed"
)

// Answer is the gate's answer to one admission request.
type Answer struct {
	// Allowed admits the write.
	Allowed bool
	// Message says why, in the ledger's numbers when the ledger refused.
	Message string
	// Warning is returned to the writer beside an admission.
	Warning string
	// Result labels the answer in metrics (ResultAdmitted, ...).
	Result string
	// Code is the HTTP status of a refusal (403 denied or no leader, 400
	// malformed, 500 error, 504 undecided).
	Code int32
	// RoundTrip says the answer took a ledger round trip: the gate wrote a
	// request into a DiskSchedule's spec (or found one written and not
	// decided yet) and waited for the leader's decision. An answer without
	// one came from what the gate read: a grant already there, a write that
	// takes no space, a dry run, a refusal before anything was asked.
	RoundTrip bool
}

// Allow admits a write, saying why.
func Allow(reason string) Answer {
	return Answer{Allowed: true, Message: reason, Result: ResultAdmitted}
}

// AllowWithWarning admits a write and warns its writer.
func AllowWithWarning(reason, warning string) Answer {
	return Answer{Allowed: true, Message: reason, Warning: warning, Result: ResultAdmitted}
}

// Deny refuses a write with msg.
func Deny(msg string) Answer {
	return Answer{Message: msg, Result: ResultDenied, Code: http.StatusForbidden}
}

// Undecided refuses a write whose decision did not come in time (err is
// the wait's error); Longhorn retries it, and finds it granted at once if
// the ledger granted it since. No leader deciding is a denial that says
// so, given at once so Longhorn's worker is free to retry; a ledger gone
// meanwhile is a denial; any other error a failure.
func Undecided(what string, err error) Answer {
	if errors.Is(err, ErrNoLeader) {
		return Answer{Message: what + ": " + err.Error() + "; retry once a leader decides",
			Result: ResultNoLeader, Code: http.StatusForbidden}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Answer{Message: what + ": the ledger gave no decision in time; retry", Result: ResultUndecided, Code: http.StatusGatewayTimeout}
	}
	if errors.Is(err, ErrNoLedger) {
		return Deny(what + ": the disk's DiskSchedule is gone")
	}
	return Failed(fmt.Errorf("%s: %w", what, err))
}

// Failed refuses a write because reading or writing a ledger failed.
func Failed(err error) Answer {
	return Answer{Message: err.Error(), Result: ResultError, Code: http.StatusInternalServerError}
}

// Malformed refuses an admission request that cannot be read.
func Malformed(err error) Answer {
	return Answer{Message: fmt.Sprintf("malformed admission request: %v", err), Result: ResultMalformed, Code: http.StatusBadRequest}
}

// Response turns a into the AdmissionReview response.
func (a Answer) Response() admission.Response {
	if a.Allowed {
		resp := admission.Allowed(a.Message)
		if a.Warning != "" {
			resp = resp.WithWarnings(a.Warning)
		}
		return resp
	}
	if a.Result == ResultDenied || a.Result == ResultNoLeader {
		return admission.Denied("diskschedule-gate: " + a.Message)
	}
	return admission.Errored(a.Code, errors.New("diskschedule-gate: "+a.Message))
}

// Admission is one admission request with the decoder of the manager's
// scheme.
type Admission struct {
	admission.Request
	// Decoder decodes the request's objects.
	Decoder admission.Decoder
}

// Decode decodes one of the request's objects (Object.Raw or
// OldObject.Raw) into obj.
func (r Admission) Decode(raw []byte, obj runtime.Object) error {
	if len(raw) == 0 {
		return errors.New("the request carries no object")
	}
	if err := r.Decoder.DecodeRaw(runtime.RawExtension{Raw: raw}, obj); err != nil {
		return fmt.Errorf("decoding the request's object: %w", err)
	}
	return nil
}

// DryRun reports whether the request must write nothing.
func (r Admission) DryRun() bool {
	return r.Request.DryRun != nil && *r.Request.DryRun
}

// IsUpdate reports whether the request updates an existing object.
func (r Admission) IsUpdate() bool {
	return r.Operation == admissionv1.Update
}
