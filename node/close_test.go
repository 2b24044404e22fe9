package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"sync"
	"testing"
	"time"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// TestCloseIsBoundedWithWritesInFlight: a leader cut off from its peers
// holds admin writes that cannot commit; closing it returns within
// node.CloseBound, and every request in flight gets an answer (503, or
// the write's result if it made it) rather than a hung or dropped
// connection.
func TestCloseIsBoundedWithWritesInFlight(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3})
	leader := c.WaitNewLeader()
	c.Partition(leader)
	var wg sync.WaitGroup
	statuses := make(chan int, 20)
	wrote := make(chan struct{}, 20)
	var mu sync.Mutex
	var finished []time.Time
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"slug":"org-%d","name":"Org %d"}`, i, i)
			trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote <- struct{}{} }}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "POST", c.URL(leader)+"/admin/v1/organizations", bytes.NewBufferString(body))
			req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
			req.Header.Set("Content-Type", "application/json")
			resp, err := c.Client().Do(req)
			mu.Lock()
			finished = append(finished, time.Now())
			mu.Unlock()
			if err != nil {
				statuses <- -1
				return
			}
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	// Every request is sent before the node closes, then given a moment
	// to reach its handler and wait on raft (a fixed pause alone let a
	// loaded machine close the node before some had even connected).
	timeout := time.After(20 * time.Second)
	for range 20 {
		select {
		case <-wrote:
		case <-timeout:
			t.Fatal("the 20 requests were not all sent within 20 s")
		}
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if err := c.KillErr(leader); err != nil && !errors.Is(err, testcluster.ErrCloseFailed) {
		t.Fatal(err)
	}
	if d := time.Since(start); d > node.CloseBound {
		t.Fatalf("Close took %s, more than its bound %s", d, node.CloseBound)
	}
	wg.Wait()
	close(statuses)
	got := map[int]int{}
	for s := range statuses {
		got[s]++
	}
	if got[-1] > 0 {
		t.Fatalf("%d requests lost their connection instead of an answer: %v", got[-1], got)
	}
	inFlight := 0
	for _, f := range finished {
		if f.After(start) {
			inFlight++
		}
	}
	if inFlight == 0 {
		t.Fatalf("no write was in flight when the node closed (answers %v): the test tests nothing", got)
	}
	t.Logf("closed in %s; %d writes were in flight; answers %v", time.Since(start).Round(time.Millisecond), inFlight, got)
	c.Heal()
}
