package ledger

import (
	"math"
	"math/bits"
)

// AddSat returns a + b, saturated to [math.MinInt64, math.MaxInt64]
// instead of wrapping around. Every sum of byte sizes in the add-on is
// made with it (or SumSat): sizes come from objects other people write,
// and a sum that wrapped would turn a full disk into an empty one.
func AddSat(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// SumSat returns the sum of sizes, saturated as AddSat saturates it.
func SumSat(sizes ...int64) int64 {
	var sum int64
	for _, n := range sizes {
		sum = AddSat(sum, n)
	}
	return sum
}

// MulDivSat returns a × b / c, truncated, computed in 128 bits so the
// product cannot overflow, and math.MaxInt64 when the quotient does not
// fit in an int64. It is 0 when a or b is not positive or c is not
// positive.
func MulDivSat(a, b, c int64) int64 {
	if a <= 0 || b <= 0 || c <= 0 {
		return 0
	}
	return mulDiv(uint64(a), uint64(b), uint64(c))
}

// mulDiv returns a × b / c (c > 0), truncated, computed in 128 bits, or
// math.MaxInt64 when the quotient does not fit in an int64.
func mulDiv(a, b, c uint64) int64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return math.MaxInt64 // the quotient would not even fit in 64 bits
	}
	q, _ := bits.Div64(hi, lo, c)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}
