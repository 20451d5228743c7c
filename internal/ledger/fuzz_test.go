package ledger

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// fuzzEntryBytes is how many bytes of FuzzDecide's data make one entry.
const fuzzEntryBytes = 18

// fuzzInput builds a decision's input from FuzzDecide's arguments: each
// fuzzEntryBytes bytes of data make one replica, backing-image or
// reservation entry (its name, its size, and whether it has a previous
// decision, in spec, persisted on the disk, its pod bound here,
// best-effort), with sizes anywhere in the int64 range.
func fuzzInput(limit int64, schedulable bool, data []byte) Input {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	in := Input{
		Spec:       dsv1.DiskScheduleSpec{Name: "d", NodeID: "n"},
		Disk:       Disk{Limit: limit & math.MaxInt64, Schedulable: schedulable, Reason: "fuzz", Message: "fuzz"},
		Now:        now,
		Pods:       map[string]PodBinding{},
		Persisted:  Owners{Replicas: map[string]bool{}, BackingImages: map[string]bool{}},
		BestEffort: map[string]bool{}, ReservationTimeout: time.Minute,
	}
	positive := func(b []byte) int64 { return max(int64(binary.BigEndian.Uint64(b)&math.MaxInt64), 1) }
	for ; len(data) >= fuzzEntryBytes; data = data[fuzzEntryBytes:] {
		kind, name := data[0]%3, fmt.Sprintf("e%d", data[0]/3%6)
		size, flags, prevSize := positive(data[1:9]), data[9], positive(data[10:18])-1
		hasPrev, rejected, inSpec := flags&1 != 0, flags&2 != 0, flags&32 == 0
		requested := size
		if flags&128 != 0 {
			requested = max(prevSize, 1)
		}
		state := dsv1.RequestStateScheduled
		if rejected {
			state = dsv1.RequestStateRejected
		}
		switch kind {
		case 0, 1:
			k := Replica
			if kind == 1 {
				k = BackingImage
			}
			if inSpec {
				req := Requests(&in.Spec, k)
				if *req == nil {
					*req = map[string]dsv1.RequestedBytes{}
				}
				(*req)[name] = dsv1.RequestedBytes(size)
			}
			if hasPrev {
				dec := Decisions(&in.Previous, k)
				if *dec == nil {
					*dec = map[string]dsv1.RequestStatus{}
				}
				(*dec)[name] = dsv1.RequestStatus{State: state, RequestedSize: requested, ScheduledSize: prevSize}
			}
			if flags&4 != 0 {
				if k == Replica {
					in.Persisted.Replicas[name] = true
				} else {
					in.Persisted.BackingImages[name] = true
				}
			}
		default:
			res := dsv1.DiskScheduleReservation{Size: size, Pod: "ns/" + name}
			if flags&64 != 0 {
				res.Replica = name
			}
			if inSpec {
				if in.Spec.Reservations == nil {
					in.Spec.Reservations = map[string]dsv1.DiskScheduleReservation{}
				}
				in.Spec.Reservations[name] = res
			}
			if hasPrev {
				if in.Previous.Reservations == nil {
					in.Previous.Reservations = map[string]dsv1.ReservationStatus{}
				}
				st := dsv1.ReservationStatus{State: dsv1.ReservationStateScheduled, RequestedSize: requested, Pod: res.Pod, ScheduledSize: prevSize}
				if rejected {
					st.State, st.ScheduledSize = dsv1.ReservationStateRejected, 0
				} else if flags&8 == 0 {
					expires := metav1.NewTime(now.Add(time.Duration(prevSize%120-60) * time.Second))
					st.ExpiresAt = &expires
				}
				in.Previous.Reservations[name] = st
			}
			if flags&8 != 0 {
				in.Pods[name] = PodBinding{State: PodBoundHere, Since: now.Add(-time.Duration(size%120) * time.Second)}
			}
			in.BestEffort[name] = flags&16 != 0
		}
	}
	return in
}

// FuzzDecide holds Decide to its promises on arbitrary ledgers, sizes up
// to 2^63 included: it is deterministic and leaves its input alone; every
// request of the spec is decided at its size and nothing else is; the
// status keeps the invariant (Violation); a shrink is always granted; a
// rejection keeps no more than the request held; and the ledger ends over
// its limit, having grown, only by adopting.
func FuzzDecide(f *testing.F) {
	entry := func(kindName byte, size uint64, flags byte, prev uint64) []byte {
		b := []byte{kindName}
		b = binary.BigEndian.AppendUint64(b, size)
		b = append(b, flags)
		return binary.BigEndian.AppendUint64(b, prev)
	}
	join := func(entries ...[]byte) []byte {
		var out []byte
		for _, e := range entries {
			out = append(out, e...)
		}
		return out
	}
	f.Add(int64(100*Gi), true, join(entry(0, 10*Gi, 0, 0), entry(1, 2*Gi, 0, 0), entry(2, 5*Gi, 0, 0)))
	f.Add(int64(100*Gi), true, join(entry(0, 60*Gi, 1, 50*Gi+1), entry(3, 60*Gi, 0, 0)))                                               // growth, and a request that does not fit
	f.Add(int64(10*Gi), true, join(entry(0, 5*Gi, 1|128, 20*Gi+1), entry(3, 30*Gi, 4, 0)))                                             // shrink, adoption over the limit
	f.Add(int64(100*Gi), false, join(entry(0, 1*Gi, 0, 0), entry(3, 1*Gi, 1, 1*Gi+1)))                                                 // not schedulable
	f.Add(int64(100*Gi), true, join(entry(2, 8*Gi, 1|64, 8*Gi+1), entry(0, 8*Gi, 0, 0)))                                               // handoff
	f.Add(int64(100*Gi), true, join(entry(2, 8*Gi, 1|8|16, 8*Gi+1), entry(0, 95*Gi, 4, 0)))                                            // a best-effort reservation yields
	f.Add(int64(math.MaxInt64), true, join(entry(0, math.MaxInt64-1, 0, 0), entry(3, math.MaxInt64, 4, 0), entry(6, 1<<62, 1, 1<<62))) // near 2^63
	f.Add(int64(0), true, join(entry(0, 1, 1|32, 5), entry(2, 7, 1|32, 7)))                                                            // removed keys
	f.Fuzz(func(t *testing.T, limit int64, schedulable bool, data []byte) {
		in := fuzzInput(limit, schedulable, data)
		before := Input{Spec: *in.Spec.DeepCopy(), Previous: *in.Previous.DeepCopy()}
		out, oc := Decide(in)
		if again, oc2 := Decide(in); !reflect.DeepEqual(out, again) || !reflect.DeepEqual(oc, oc2) {
			t.Fatalf("Decide is not deterministic")
		}
		if !reflect.DeepEqual(before.Spec, in.Spec) || !reflect.DeepEqual(before.Previous, in.Previous) {
			t.Fatalf("Decide changed its input")
		}
		if v := Violation(out); v != "" {
			t.Fatalf("invariant broken: %s", v)
		}
		for _, k := range Kinds() {
			requests, decided, prev := *Requests(&in.Spec, k), *Decisions(&out, k), *Decisions(&in.Previous, k)
			for name, size := range requests {
				st, ok := decided[name]
				if !ok || st.RequestedSize != int64(size) {
					t.Fatalf("%s %s of %d bytes not decided at its size: %+v", k, name, size, st)
				}
				p, hadPrev := prev[name]
				if hadPrev && p.RequestedSize != int64(size) && int64(size) <= p.ScheduledSize &&
					(st.State != dsv1.RequestStateScheduled || st.ScheduledSize != int64(size)) {
					t.Fatalf("%s %s shrunk from %d to %d bytes not granted: %+v", k, name, p.ScheduledSize, size, st)
				}
				if st.State == dsv1.RequestStateRejected && st.ScheduledSize > max(p.ScheduledSize, 0) {
					t.Fatalf("%s %s rejected keeping %d bytes, more than the %d it held", k, name, st.ScheduledSize, p.ScheduledSize)
				}
			}
			for name := range decided {
				if _, ok := requests[name]; !ok {
					t.Fatalf("%s %s decided without a request", k, name)
				}
			}
		}
		for name, res := range in.Spec.Reservations {
			if st, ok := out.Reservations[name]; !ok || st.RequestedSize != res.Size {
				t.Fatalf("reservation %s of %d bytes not decided at its size: %+v", name, res.Size, st)
			}
		}
		for name := range out.Reservations {
			if _, ok := in.Spec.Reservations[name]; !ok {
				t.Fatalf("reservation %s decided without a request", name)
			}
		}
		if prev := scheduledSum(in.Previous); out.StorageScheduled > out.StorageLimit && oc.Adopted == 0 && out.StorageScheduled > prev {
			t.Fatalf("over the limit without adopting: %d scheduled of limit %d, %d before", out.StorageScheduled, out.StorageLimit, prev)
		}
	})
}
