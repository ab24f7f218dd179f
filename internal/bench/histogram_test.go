package bench

import (
	"testing"
	"time"
)

// Every bucket's middle falls in that bucket, and buckets are ordered, so
// a quantile never lands in the wrong one.
func TestHistogramBucketsRoundTrip(t *testing.T) {
	prev := uint64(0)
	for i := range histBuckets {
		v := histValue(i)
		if got := histIndex(v); got != i {
			t.Fatalf("bucket %d: its middle %d maps to bucket %d", i, v, got)
		}
		if i > 0 && v <= prev {
			t.Fatalf("bucket %d: middle %d not above the previous %d", i, v, prev)
		}
		prev = v
	}
}

// A quantile is the middle of the bucket holding the sample of that rank,
// which is within 1/64 of the sample; below 32 ns values are exact.
func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	for us := 1; us <= 10000; us++ {
		h.record(time.Duration(us) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.50, 5000 * time.Microsecond}, {0.95, 9500 * time.Microsecond}, {0.99, 9900 * time.Microsecond}, {1, 10 * time.Millisecond}} {
		got := h.quantile(c.q)
		bucket := time.Duration(histValue(histIndex(uint64(c.want))))
		if got != bucket {
			t.Errorf("p%v = %v, want %v (the bucket of %v)", c.q*100, got, bucket, c.want)
		}
		if diff := (got - c.want).Abs(); diff > c.want/64 {
			t.Errorf("p%v = %v is %v from %v, more than 1/64", c.q*100, got, diff, c.want)
		}
	}

	var small, other histogram
	for ns := 1; ns <= 31; ns++ {
		small.record(time.Duration(ns))
	}
	other.record(time.Second)
	small.merge(&other)
	if got := small.quantile(0.5); got != 16 {
		t.Errorf("p50 of 1…31 ns and 1 s = %v, want 16ns", got)
	}
	if small.n != 32 || small.quantile(1) != time.Duration(histValue(histIndex(uint64(time.Second)))) {
		t.Errorf("merged histogram: n %d, max %v", small.n, small.quantile(1))
	}
	var empty histogram
	if empty.quantile(0.99) != 0 {
		t.Error("an empty histogram has a quantile")
	}
}
