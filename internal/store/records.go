package store

// RecordTx is the part of Tx that keeps records, buckets, blobs and
// namespace settings.
type RecordTx interface {
}
