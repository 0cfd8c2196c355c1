package scalable

// ErrorRate is the error rate the chain was created with (BF.RESERVE's
// error_rate, or bf-error-rate when auto-created): the first link's rate,
// before the halving a scaling chain applies to it. Each later link halves
// again, so a scaling chain filled to any length stays estimated below this
// rate; a non-scaling one reaches it when full.
func (c *Chain) ErrorRate() float64 {
	e := c.first.Error
	if !c.NonScaling() {
		e /= tightening
	}
	return e
}

// CuckooErrorRate is a Cuckoo filter's nominal false-positive rate for a
// bucket size: one full sub-filter, whose lookup compares 2·bucketSize
// 8-bit fingerprints (of 255 values; 0 marks an empty slot).
func CuckooErrorRate(bucketSize uint16) float64 {
	p := 1.0
	for range 2 * int(bucketSize) {
		p *= 1 - 1.0/255
	}
	return 1 - p
}
