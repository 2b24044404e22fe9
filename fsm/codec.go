package fsm

import (
	"fmt"

	"github.com/fxamacker/cbor/v2"
	bolt "go.etcd.io/bbolt"
)

// Records are stored as CBOR (RFC 8949) through fxamacker/cbor. Each
// field of a stored record has a small integer key (its cbor tag,
// keyasint; the json tag still names it in the admin API and in raft
// commands), taken in declaration order and never reused, so a record
// is compact and a view (access.go: a struct with some of a record's
// fields, under the same keys) skips the fields it does not read without
// allocating. The format was chosen by measurement (BENCHMARKS.md,
// "Record codec"). Times keep encoding/json's RFC 3339 form with
// nanoseconds and the zone offset, so a record reads back exactly as
// before; a zero time is CBOR null. Schema version 1 files (JSON records)
// are rewritten in place when opened or restored (schema.go).
//
// Both modes are immutable once built and safe for concurrent use.
var (
	recordEnc = mustEncMode()
	recordDec = mustDecMode()
)

func mustEncMode() cbor.EncMode {
	em, err := cbor.EncOptions{
		Time: cbor.TimeRFC3339Nano,
		Sort: cbor.SortNone, // struct fields in declaration order; maps are not hashed
	}.EncMode()
	if err != nil {
		panic(err)
	}
	return em
}

func mustDecMode() cbor.DecMode {
	dm, err := cbor.DecOptions{
		// Member names match exactly: the encoder wrote them.
		FieldNameMatching: cbor.FieldNameMatchingCaseSensitive,
		// A record is at most a few KiB; refuse what no apply writes.
		MaxArrayElements: 65536,
		MaxMapPairs:      65536,
		MaxNestedLevels:  16,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return dm
}

// encodeRecord is the stored form of a record.
func encodeRecord(v any) ([]byte, error) { return recordEnc.Marshal(v) }

// decodeRecord reads a stored record into v, a pointer to the record's
// type or to a view of it (a struct with some of its fields).
func decodeRecord(b []byte, v any) error { return recordDec.Unmarshal(b, v) }

// put stores v under key.
func put(tx *bolt.Tx, bucket []byte, key string, v any) {
	b, err := encodeRecord(v)
	if err != nil {
		panic(fmt.Sprintf("fsm: encode record: %v", err))
	}
	if err := tx.Bucket(bucket).Put([]byte(key), b); err != nil {
		panic(fmt.Sprintf("fsm: put: %v", err))
	}
	accessWrite(tx, bucket)
}

// get decodes the record under key into v; false when absent. A record
// that does not decode is a corrupt state file: get panics, as apply does.
func get(tx *bolt.Tx, bucket []byte, key string, v any) bool {
	b := tx.Bucket(bucket).Get([]byte(key))
	if b == nil {
		return false
	}
	if err := decodeRecord(b, v); err != nil {
		panic(fmt.Sprintf("fsm: decode record %s/%s: %v", bucket, key, err))
	}
	return true
}

// mustUnmarshal decodes a record read from a cursor.
func mustUnmarshal(b []byte, v any) {
	if err := decodeRecord(b, v); err != nil {
		panic(fmt.Sprintf("fsm: decode record: %v", err))
	}
}

func del(tx *bolt.Tx, bucket []byte, key string) {
	if err := tx.Bucket(bucket).Delete([]byte(key)); err != nil {
		panic(fmt.Sprintf("fsm: delete: %v", err))
	}
	accessWrite(tx, bucket)
}

func exists(tx *bolt.Tx, bucket []byte, key string) bool {
	return tx.Bucket(bucket).Get([]byte(key)) != nil
}
