package bench

import (
	"math/bits"
	"time"
)

// histogram counts durations in log-linear buckets: 32 per power of two,
// so a quantile is within 1/64 of the true value, in a fixed few
// kilobytes however long a soak runs (a million samples a minute would
// otherwise be kept whole). Each worker fills its own; they are merged
// after the run.
type histogram struct {
	counts [histBuckets]uint64
	n      uint64
}

const (
	histSubBits = 5 // 32 sub-buckets per power of two
	histSub     = 1 << histSubBits
	histBuckets = (64 - histSubBits + 1) * histSub
)

// histIndex maps nanoseconds to a bucket: below 2^histSubBits exactly,
// above by the top histSubBits+1 bits.
func histIndex(ns uint64) int {
	if ns < histSub {
		return int(ns)
	}
	exp := bits.Len64(ns) - histSubBits - 1 // ≥ 0
	return (exp+1)*histSub + int(ns>>exp) - histSub
}

// histValue is the middle of bucket i, inverse of histIndex.
func histValue(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	exp := i/histSub - 1
	low := uint64(i%histSub+histSub) << exp
	return low + (uint64(1)<<exp)/2
}

func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[histIndex(uint64(d))]++
	h.n++
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile is the duration at or below which a fraction q of the samples
// fall (0 when there are none).
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(histValue(i))
		}
	}
	return 0 // unreachable: the counts sum to n
}
