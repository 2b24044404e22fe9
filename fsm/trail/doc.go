// Package trail stores the audit trail on local disk, outside the raft
// snapshot: an append-only, crash-safe, compact log of events in segment
// files under one directory. Package fsm writes each applied command's
// events here (Append), answers the console and the person's page from it
// (Query), checks the chain (Verify) and ships what a peer lacks (Export;
// ExportWith, followed by the events the state machine has not appended
// yet; Import). Scan reads a range in order (a backup puts the trail back
// into the state file). It imports nothing of the module, so fsm can
// import it.
//
// An Append is durable once its block is synced: a seal that fails after
// it does not fail the Append, and the next Append seals.
//
// Event and EventHash are fsm's: the hash is SHA-256 over the previous
// hash and the core deterministic CBOR of the event, so a trail moved
// here verifies as it did in bbolt.
//
// Layout (block.go, segment.go): the active segment takes one
// DEFLATE-compressed block an Append, synced; at SegmentEvents (or
// SegmentBytes) it is rewritten as a sealed segment of BlockEvents-event
// blocks with a footer index (postings of type, subject, client and
// organization, sorted keys read through a sparse table), and a new
// active segment begins.
//
// Measured on 2 cores (AMD EPYC, shared), see README.md:
//
//	go test -run '^$' -bench . -benchtime 1x ./fsm/trail/
//
// 172 bytes an event sealed (1,048,576 events over 100,000 people;
// bbolt held about 640), Append of 1 event 1.1 ms (fsync-bound), of 256
// events 2.3 ms (109,000 events/s), a person's newest 20 of a million
// events 9 ms cold, Export+Import of a million events 3.9 to 4.5 s
// (about 250,000 events/s, 130 stream bytes an event).
package trail
