package fsm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// scanWorld: the three deliveries of a sign-out in deliveryWorld, and a
// fourth, newer one whose pending entry was written as an older node
// wrote them (an empty value). It returns the ids, oldest first.
func scanWorld(t *testing.T) (*harness, []string) {
	t.Helper()
	h := deliveryWorld(t)
	ended := h.mustApply(TypeEndSSOSession, EndSSOSession{ID: "sso1", At: t0, Reason: EndLogout}).Value.(EndedApps)
	var ids []string
	for _, d := range ended.Deliveries {
		ids = append(ids, d.ID)
	}
	legacy := Delivery{ID: fmt.Sprintf("%020d-0000", h.index+1), ClientID: "bc-single", URI: "https://single/bc",
		CreatedAt: t0, State: DeliveryPending, NextAttemptAt: t0}
	if err := h.f.db.Update(func(tx *bolt.Tx) error {
		put(tx, bucketDeliveries, legacy.ID, legacy)
		putIndex(tx, bucketPending, legacy.ID, "")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	return h, append(ids, legacy.ID)
}

// TestScanPending: the walk's order, start, bound and stop, and the
// references it gives without reading a delivery.
func TestScanPending(t *testing.T) {
	h, ids := scanWorld(t)
	uris := map[string]string{"bc-single": "https://single/bc", "bc-multi": "https://multi/bc"}
	cases := []struct {
		name     string
		after    string
		limit    int
		stopAt   int // visit returns false on this visit (1-based); 0: never
		want     []string
		wantLast string
	}{
		{"from the oldest to the end", "", 10, 0, ids, ""},
		{"a limit ends the walk", "", 2, 0, ids[:2], ids[1]},
		{"a limit that meets the end is the end", "", 4, 0, ids, ""},
		{"after an id", ids[0], 10, 0, ids[1:], ""},
		{"after an id that is gone", ids[0] + "x", 10, 0, ids[1:], ""},
		{"after the last", ids[3], 10, 0, nil, ""},
		{"visit stops the walk", "", 10, 2, ids[:2], ids[1]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			last, err := h.f.State().ScanPending(c.after, c.limit, func(ref PendingRef, read func() (Delivery, bool)) bool {
				got = append(got, ref.ID)
				if ref.URI != uris[ref.ClientID] {
					t.Errorf("%s: got client %q uri %q", ref.ID, ref.ClientID, ref.URI)
				}
				if d, ok := read(); !ok || d.ID != ref.ID || d.ClientID != ref.ClientID {
					t.Errorf("read %s: got %+v %v", ref.ID, d, ok)
				}
				return len(got) != c.stopAt
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) || last != c.wantLast {
				t.Fatalf("got %v last %q, want %v last %q", got, last, c.want, c.wantLast)
			}
		})
	}
}

// TestPendingEntryNamesTheReceiver: the entry a logout writes in the
// pending index holds the client and URI of its delivery, and goes when
// the delivery is final.
func TestPendingEntryNamesTheReceiver(t *testing.T) {
	h := deliveryWorld(t)
	ended := h.mustApply(TypeEndSSOSession, EndSSOSession{ID: "sso1", At: t0, Reason: EndLogout}).Value.(EndedApps)
	entries := func() map[string]pendingEntry {
		out := map[string]pendingEntry{}
		h.f.db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketPending).ForEach(func(k, v []byte) error {
				var e pendingEntry
				mustUnmarshal(v, &e)
				out[string(k)] = e
				return nil
			})
		})
		return out
	}
	got := entries()
	for _, d := range ended.Deliveries {
		if e := got[d.ID]; e.ClientID != d.ClientID || e.URI != d.URI {
			t.Fatalf("%s: got %+v, want client %q uri %q", d.ID, e, d.ClientID, d.URI)
		}
	}
	h.mustApply(TypeDeliveryOutcome, DeliveryOutcome{Outcomes: []Outcome{{ID: ended.Deliveries[0].ID, State: DeliverySent, At: t0}}})
	if _, ok := entries()[ended.Deliveries[0].ID]; ok || len(entries()) != len(ended.Deliveries)-1 {
		t.Fatalf("after the outcome: got %v", entries())
	}
}

// BenchmarkScanPendingPastABusyClient: the cost per pending delivery of
// passing over those of a client at its cap (the sender's fair scan).
func BenchmarkScanPendingPastABusyClient(b *testing.B) {
	const n = 100_000
	f, err := Open(b.TempDir() + "/state.db")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := f.db.Update(func(tx *bolt.Tx) error {
		for i := range n {
			d := Delivery{ID: fmt.Sprintf("%020d-0000", i+1), ClientID: "hung", URI: "https://hung.example/bc",
				Sub: strings.Repeat("s", 36), OrgID: strings.Repeat("o", 36), SID: strings.Repeat("i", 36),
				CreatedAt: t0, State: DeliveryPending, NextAttemptAt: t0.Add(time.Second)}
			put(tx, bucketDeliveries, d.ID, d)
			put(tx, bucketPending, d.ID, pendingEntry{ClientID: d.ClientID, URI: d.URI})
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		seen := 0
		if _, err := f.State().ScanPending("", n, func(ref PendingRef, _ func() (Delivery, bool)) bool {
			if ref.ClientID == "hung" {
				seen++
			}
			return true
		}); err != nil || seen != n {
			b.Fatalf("seen %d of %d: %v", seen, n, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/delivery")
}
