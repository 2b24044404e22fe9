package cluster

import (
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// tcpTransport is raft's own transport on a loopback port, closed when
// the test ends.
func tcpTransport(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trans.Close() })
	return trans
}

// follower is a raft transport that answers every AppendEntries it gets
// with success, as a follower's raft would.
func follower(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	trans := tcpTransport(t)
	go func() {
		for rpc := range trans.Consumer() {
			rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
		}
	}()
	return trans
}

// sendAfterConsumerStops has raft's decoder read one answer and then stop
// reading (as it does on a refusal or a newer term), while the send loop
// goes on sending, as it may before it notices. It reports whether every
// send returned within wait.
func sendAfterConsumerStops(t *testing.T, p raft.AppendPipeline, wait time.Duration) bool {
	t.Helper()
	if _, err := p.AppendEntries(&raft.AppendEntriesRequest{Term: 1}, new(raft.AppendEntriesResponse)); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-p.Consumer():
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer to the first AppendEntries")
	}
	// raft's decoder has stopped: nobody reads Consumer any more.
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for range 5 {
			if _, err := p.AppendEntries(&raft.AppendEntriesRequest{Term: 1}, new(raft.AppendEntriesResponse)); err != nil {
				return
			}
		}
	}()
	select {
	case <-sent:
		return true
	case <-time.After(wait):
		return false
	}
}

// TestPipelineSendsNeverWaitForAStoppedDecoder: with raft's own pipeline
// (MaxRPCsInFlight 2), sends after raft's decoder stopped wait forever,
// the replication stall and shutdown hang pipelineTransport repairs; with
// the repair every send returns and the pipeline closes.
func TestPipelineSendsNeverWaitForAStoppedDecoder(t *testing.T) {
	f, leader := follower(t), tcpTransport(t)

	t.Run("raft's pipeline", func(t *testing.T) {
		p, err := leader.AppendEntriesPipeline("f", f.LocalAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close() // releases the stuck send
		if sendAfterConsumerStops(t, p, time.Second) {
			t.Fatal("raft's own pipeline no longer waits on a stopped decoder: pipelineTransport may be dropped")
		}
	})
	t.Run("repaired", func(t *testing.T) {
		p, err := pipelineTransport{leader}.AppendEntriesPipeline("f", f.LocalAddr())
		if err != nil {
			t.Fatal(err)
		}
		if !sendAfterConsumerStops(t, p, 10*time.Second) {
			p.Close()
			t.Fatal("a send waited on the stopped decoder")
		}
		closed := make(chan error, 1)
		go func() { closed <- p.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the pipeline did not close")
		}
	})
}

// TestDrainedPipelineKeepsOrder: answers reach raft's decoder in the order
// the pipeline decoded them, whatever the decoder's pace.
func TestDrainedPipelineKeepsOrder(t *testing.T) {
	f, leader := follower(t), tcpTransport(t)
	p, err := pipelineTransport{leader}.AppendEntriesPipeline("f", f.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 50
	go func() {
		for i := range n {
			p.AppendEntries(&raft.AppendEntriesRequest{Term: 1, PrevLogEntry: uint64(i)}, new(raft.AppendEntriesResponse))
		}
	}()
	for i := range n {
		if i%10 == 0 {
			time.Sleep(20 * time.Millisecond) // a slow reader: the answers queue
		}
		select {
		case fut := <-p.Consumer():
			if got := fut.Request().PrevLogEntry; got != uint64(i) {
				t.Fatalf("answer %d is to request %d", i, got)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("answer %d did not come", i)
		}
	}
}
