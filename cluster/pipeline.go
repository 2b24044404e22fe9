package cluster

import (
	"sync"

	"github.com/hashicorp/raft"
)

// pipelineTransport is raft's NetworkTransport with one repair, to its
// pipelined replication (raft v1.7.3, unchanged in later releases).
//
// The leader replicates to each follower over a pipeline: its send loop
// hands each AppendEntries to the transport, whose decoder reads the
// answers and passes them on to raft's own decoder over an unbuffered
// channel (MaxRPCsInFlight 2 leaves both of the pipeline's channels
// without a buffer). When raft's decoder stops (the follower refused an
// entry, or answered with a newer term, as after a leadership hand-over)
// nobody reads that channel any more: the transport's decoder waits on it
// for good, so the next send waits for the decoder for good, and the
// send loop never gets back to the check that would close the pipeline.
// Replication to that follower stops while its heartbeats go on (so no
// election repairs it), and raft's Shutdown waits on the loop forever: a
// node that had led could not stop (node.Close gave up after its bound).
//
// The repair: every answer the transport decodes is taken off at once and
// queued for raft's decoder, which reads the queue as it did the channel.
// The transport's decoder never waits on raft's, so a send never waits
// for good either, and the send loop sees raft's decoder stopped and
// closes the pipeline as raft intends.
type pipelineTransport struct {
	*raft.NetworkTransport
}

// AppendEntriesPipeline is the transport's pipeline, with its answers
// always taken off.
func (t pipelineTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return newDrainedPipeline(p), nil
}

// drainedPipeline relays a pipeline's answers through a queue that never
// makes the pipeline wait.
type drainedPipeline struct {
	raft.AppendPipeline
	out  chan raft.AppendFuture
	stop chan struct{}
	once sync.Once
	done chan struct{} // the relay has returned
}

func newDrainedPipeline(p raft.AppendPipeline) *drainedPipeline {
	d := &drainedPipeline{AppendPipeline: p, out: make(chan raft.AppendFuture),
		stop: make(chan struct{}), done: make(chan struct{})}
	go d.relay()
	return d
}

// relay takes every answer off the pipeline at once and hands the queued
// ones to whoever reads Consumer, until Close. The queue holds only the
// answers raft's decoder has not read yet: while it reads, no more than
// are in flight; once it has stopped, the few the send loop sent before
// it noticed.
func (d *drainedPipeline) relay() {
	defer close(d.done)
	in := d.AppendPipeline.Consumer()
	var queue []raft.AppendFuture
	for {
		var out chan raft.AppendFuture
		var head raft.AppendFuture
		if len(queue) > 0 {
			out, head = d.out, queue[0]
		}
		select {
		case f := <-in:
			queue = append(queue, f)
		case out <- head:
			queue[0] = nil
			queue = queue[1:]
		case <-d.stop:
			return
		}
	}
}

// Consumer is where raft's decoder reads the answers.
func (d *drainedPipeline) Consumer() <-chan raft.AppendFuture { return d.out }

// Close stops the relay and closes the pipeline.
func (d *drainedPipeline) Close() error {
	d.once.Do(func() { close(d.stop) })
	err := d.AppendPipeline.Close()
	<-d.done
	return err
}
